//! Saving an instance's state to `archive.path` and restoring it into a new MiniCluster.
//!
//! With `sched-simple` and with Fluxion (the default). Fluxion needs the operator's hold of the
//! queue (an rc1 task, see `lead.sh.j2`): without it Fluxion 0.54.0 rejects every
//! restored pending job (`alloc denied due to type="unsatisfiable"`), because the job-manager
//! hands them over in rc1, before any rank is online, and Fluxion's fcfs match fails a job
//! that asks for more nodes than are up.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use flux_operator::api::RestoreStatus;
use flux_operator::controller::status::{BrokerPod, lead_restore, lead_save};

use crate::cluster::{MiniClusterRun, Start, minicluster};

const RUN: Duration = Duration::from_secs(120);

/// `scheduler:` lines of `spec.flux`, by scheduler (`flux:` also sets `logLevel`, Flux's
/// default, so it is never empty).
const SIMPLE: &str = "    scheduler:\n      simple: true\n";
const FLUXION: &str = "";

fn with_archive(name: &str, size: i32, host_dir: &str, scheduler: &str) -> String {
    format!(
        "apiVersion: flux-framework.org/v1alpha2
kind: MiniCluster
metadata:
  name: {name}
spec:
  size: {size}
  interactive: true
  flux:
{scheduler}    logLevel: 6
  archive:
    path: /state/flux.tar.gz
  containers:
    - image: rockylinux:9
      volumes:
        state:
          path: /state
          hostPath: {host_dir}
"
    )
}

/// Two jobs run to completion on `save`'s lone broker, then the instance stops and its lead
/// saves the archive (and exits 0).
fn run_two_jobs_and_save(save: &MiniClusterRun) {
    save.wait_flux("resource list -s up -no {nnodes}", RUN, |o| o.trim() == "1");
    for _ in 0..2 {
        save.flux_ok("run true");
    }
    save.shutdown();
    assert_eq!(save.wait_lead(RUN), 0, "{}", save.debug());
}

/// What the operator reports in `status.restore` from the lead pod's status: the report the
/// lead's archive init container wrote, as the kubelet passes it on.
fn restore_status(run: &MiniClusterRun) -> Option<RestoreStatus> {
    lead_restore(&[Arc::new(BrokerPod::from(run.lead_pod_status()))])
}

/// `id -> result` of every job the instance knows (`flux jobs -a`).
fn jobs(run: &MiniClusterRun) -> BTreeMap<String, String> {
    run.flux_ok("jobs -a --no-header --format={id.f58},{result}")
        .lines()
        .filter_map(|l| l.split_once(','))
        .map(|(id, r)| (id.trim().to_string(), r.trim().to_string()))
        .collect()
}

#[test]
fn flux_shutdown_saves_in_the_grace_and_another_size_restores_every_job_with_its_id() {
    saved_queue_restores(SIMPLE);
}

/// Fluxion sees the restored pending jobs only once the new cluster's ranks are up, so none is
/// rejected as unsatisfiable and every one runs.
#[test]
fn fluxion_runs_every_restored_pending_job_once_the_ranks_are_up() {
    saved_queue_restores(FLUXION);
}

/// The user's `flux shutdown` saves like any ending (the instance runs `save.sh` as its
/// cleanup command): the queue stops, a running job that ends within
/// `archive.gracePeriodSeconds` completes, one that does not is canceled with the note; then
/// a cluster of another size restores every job with its id.
fn saved_queue_restores(scheduler: &str) {
    let host = tempfile::tempdir().unwrap();
    let host_dir = host.path().display().to_string();
    let yaml = |name: &str, size: i32| {
        with_archive(name, size, &host_dir, scheduler).replace(
            "    path: /state/flux.tar.gz\n",
            "    path: /state/flux.tar.gz\n    gracePeriodSeconds: 40\n",
        )
    };

    // A cluster of 2: two jobs hold both nodes (one ends within the grace, one cannot);
    // eight more need both nodes, so they wait until the shutdown whenever the first ends.
    let a = MiniClusterRun::start(minicluster(&yaml("save", 2)), Start::default());
    a.wait_flux("resource list -s up -no {nnodes}", RUN, |o| o.trim() == "2");
    // No archive yet: nothing restored, nothing reported.
    assert_eq!(restore_status(&a), None, "{}", a.debug());
    let running = [
        a.flux_ok("submit -N1 bash -c 'sleep 25; echo finished-in-grace'")
            .trim()
            .to_string(),
        a.flux_ok("submit -N1 sleep 600").trim().to_string(),
    ];
    for id in &running {
        a.wait_flux(&format!("jobs -no {{state}} {id}"), RUN, |o| {
            o.trim() == "RUN"
        });
    }
    let mut pending = Vec::new();
    for i in 0..8 {
        pending.push(
            a.flux_ok(&format!("submit -N2 echo restored-{i}"))
                .trim()
                .to_string(),
        );
    }
    for id in &pending {
        a.wait_flux(&format!("jobs -no {{state}} {id}"), RUN, |o| {
            o.trim() == "SCHED"
        });
    }
    // The short job is still running when the user shuts the instance down.
    assert_eq!(
        a.flux_ok(&format!("jobs -no {{state}} {}", running[0]))
            .trim(),
        "RUN",
        "the machine was too slow for this test's timing"
    );
    a.shutdown();
    assert_eq!(a.wait_lead(RUN), 0, "{}", a.debug());
    assert!(
        a.lead_log()
            .contains("saved Flux state to /state/flux.tar.gz"),
        "{}",
        a.debug()
    );
    assert!(host.path().join("flux.tar.gz").exists());
    assert!(
        !host.path().join(".partial-flux.tar.gz").exists(),
        "a partial dump was left"
    );
    drop(a);

    // A new MiniCluster of 3 with the same archive: nothing is lost, every id is kept.
    let b = MiniClusterRun::start(minicluster(&yaml("restore", 3)), Start::default());
    assert!(
        b.lead_log().contains("restoring Flux state") || {
            b.wait_flux("resource list -s up -no {nnodes}", RUN, |o| o.trim() == "3");
            b.lead_log().contains("restoring Flux state")
        }
    );
    b.wait_flux("resource list -s up -no {nnodes}", RUN, |o| o.trim() == "3");
    // status.restore: the 8 pending jobs; of the two that ran, one ended in the grace and
    // the save canceled the other.
    let restore = restore_status(&b).unwrap_or_else(|| panic!("no restore: {}", b.debug()));
    assert_eq!(
        (
            restore.archive.as_str(),
            restore.pending_jobs,
            restore.canceled_jobs,
            restore.ended_jobs
        ),
        ("/state/flux.tar.gz", 8, 1, 1),
        "{restore:?}"
    );
    for id in &pending {
        let result = b.wait_job_result(id, RUN);
        let why = b.flux(&format!("job eventlog {id}")).1 + &b.flux(&format!("job attach {id}")).1;
        assert_eq!(result, "COMPLETED", "job {id}:\n{why}\n{}", b.debug());
    }
    if scheduler == FLUXION {
        let dmesg = b.flux_ok("dmesg");
        assert!(dmesg.contains("queue released"), "{dmesg}");
    }
    let all = jobs(&b);
    for id in &pending {
        assert_eq!(
            all.get(id).map(String::as_str),
            Some("COMPLETED"),
            "{all:?}"
        );
    }
    // The job that ended within the grace completed; the one that could not is reported,
    // canceled with the save's note, not dropped.
    assert_eq!(
        all.get(&running[0]).map(String::as_str),
        Some("COMPLETED"),
        "{all:?}"
    );
    assert!(
        b.flux_ok(&format!("job attach {}", running[0]))
            .contains("finished-in-grace")
    );
    assert_eq!(
        all.get(&running[1]).map(String::as_str),
        Some("CANCELED"),
        "{all:?}"
    );
    let why = b.flux_ok(&format!("job eventlog {}", running[1]));
    assert!(
        why.contains("still running when the instance was saved to the archive"),
        "{why}"
    );
    let out = b.flux_ok(&format!("job attach {}", pending[3]));
    assert!(out.contains("restored-3"), "{out}");
    b.shutdown();
    assert_eq!(b.wait_lead(RUN), 0, "{}", b.debug());
}

/// The pod deletion path (the MiniCluster deleted or suspended, Kueue preemption): every pod
/// gets SIGTERM at once and its own termination grace period, as from the kubelet.
/// `runningJobs: Finish` (the default): running jobs finish within the grace, the queue is
/// saved, and a smaller cluster restores all ten jobs with their ids: none lost.
#[test]
fn a_deleted_cluster_lets_running_jobs_finish_saves_its_queue_and_a_smaller_cluster_runs_all_ten() {
    let host = tempfile::tempdir().unwrap();
    let host_dir = host.path().display().to_string();
    let yaml = |name: &str, size: i32| {
        with_archive(name, size, &host_dir, FLUXION).replace(
            "    path: /state/flux.tar.gz\n",
            "    path: /state/flux.tar.gz\n    gracePeriodSeconds: 40\n",
        )
    };
    let mut a = MiniClusterRun::start(minicluster(&yaml("stop", 3)), Start::default());
    assert_eq!(
        a.lead().termination_grace(),
        Duration::from_secs(40 + 30),
        "the lead's pod leaves the time for the jobs and the save"
    );
    a.wait_flux("resource list -s up -no {nnodes}", RUN, |o| o.trim() == "3");
    // Three jobs hold the three nodes (long enough to be still running when the pods go,
    // also on a loaded machine; short enough to finish in the grace); seven wait.
    let running: Vec<String> = (0..3)
        .map(|i| {
            a.flux_ok(&format!("submit -N1 bash -c 'sleep 20; echo ran-{i}'"))
                .trim()
                .to_string()
        })
        .collect();
    for id in &running {
        a.wait_flux(&format!("jobs -no {{state}} {id}"), RUN, |o| {
            o.trim() == "RUN"
        });
    }
    let pending: Vec<String> = (0..7)
        .map(|i| {
            a.flux_ok(&format!("submit -N1 echo restored-{i}"))
                .trim()
                .to_string()
        })
        .collect();
    for id in &pending {
        a.wait_flux(&format!("jobs -no {{state}} {id}"), RUN, |o| {
            o.trim() == "SCHED"
        });
    }
    // Still waiting when the pods go (all 7, unless a running job already ended on a slow
    // machine and one started: the running jobs hold the nodes for 20 s).
    let waiting = a
        .flux_ok("jobs --no-header --filter=sched --format={id}")
        .lines()
        .count() as i32;
    assert!(waiting > 0, "no job was waiting any more");
    a.delete_all_as_kubelet();
    let log = a.lead_log();
    assert!(
        log.contains("SIGTERM: saving the instance")
            && log.contains("saved Flux state to /state/flux.tar.gz"),
        "{}",
        a.debug()
    );
    assert!(!host.path().join(".partial-flux.tar.gz").exists());
    drop(a);

    // A cluster of 2 with the same archive: every id, every job, none lost.
    let b = MiniClusterRun::start(minicluster(&yaml("resume", 2)), Start::default());
    b.wait_flux("resource list -s up -no {nnodes}", RUN, |o| o.trim() == "2");
    // status.restore: the waiting jobs pending; the others (the 3 that ran, which finished
    // within the grace) ended.
    let restore = restore_status(&b).unwrap_or_else(|| panic!("no restore: {}", b.debug()));
    assert_eq!(
        (
            restore.pending_jobs,
            restore.canceled_jobs,
            restore.ended_jobs,
            restore.error.as_str()
        ),
        (waiting, 0, 10 - waiting, ""),
        "{restore:?}"
    );
    for id in &pending {
        b.wait_job_result(id, RUN);
    }
    let all = jobs(&b);
    let lost: Vec<&String> = running
        .iter()
        .chain(&pending)
        .filter(|id| all.get(*id).map(String::as_str) != Some("COMPLETED"))
        .collect();
    assert!(
        lost.is_empty(),
        "jobs not completed with their id: {lost:?} of {all:?}\n{}",
        b.debug()
    );
    let out = b.flux_ok(&format!("job attach {}", running[1]));
    assert!(out.contains("ran-1"), "{out}");
    b.shutdown();
    assert_eq!(b.wait_lead(RUN), 0, "{}", b.debug());
}

/// `runningJobs: Cancel`: the save does not wait; the running job stays in the archive,
/// canceled, with the note saying why.
#[test]
fn cancel_policy_saves_at_once_and_reports_the_running_job_as_canceled_with_why() {
    let host = tempfile::tempdir().unwrap();
    let host_dir = host.path().display().to_string();
    let yaml = |name: &str| {
        with_archive(name, 2, &host_dir, SIMPLE).replace(
            "    path: /state/flux.tar.gz\n",
            "    path: /state/flux.tar.gz\n    runningJobs: Cancel\n",
        )
    };
    let mut a = MiniClusterRun::start(minicluster(&yaml("quick")), Start::default());
    a.wait_flux("resource list -s up -no {nnodes}", RUN, |o| o.trim() == "2");
    let id = a.flux_ok("submit -N1 sleep 600").trim().to_string();
    a.wait_flux(&format!("jobs -no {{state}} {id}"), RUN, |o| {
        o.trim() == "RUN"
    });
    let started = std::time::Instant::now();
    a.delete_all_as_kubelet();
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "the save waited for the job: {:?}",
        started.elapsed()
    );
    assert!(a.lead_log().contains("saved Flux state"), "{}", a.debug());
    drop(a);

    let b = MiniClusterRun::start(minicluster(&yaml("after")), Start::default());
    b.wait_flux("resource list -s up -no {nnodes}", RUN, |o| o.trim() == "2");
    assert_eq!(jobs(&b).get(&id).map(String::as_str), Some("CANCELED"));
    // status.restore counts it as canceled by the save.
    let restore = restore_status(&b).unwrap_or_else(|| panic!("no restore: {}", b.debug()));
    assert_eq!(
        (
            restore.pending_jobs,
            restore.canceled_jobs,
            restore.ended_jobs
        ),
        (0, 1, 0),
        "{restore:?}"
    );
    let why = b.flux_ok(&format!("job eventlog {id}"));
    assert!(
        why.contains("still running when the instance was saved to the archive"),
        "{why}"
    );
    b.shutdown();
    assert_eq!(b.wait_lead(RUN), 0, "{}", b.debug());
}

/// An archive that is not a Flux dump: the lead pod's `flux-archive` init container fails
/// with the reason, so no broker starts empty and then saves over it. The archive is left
/// byte for byte, and the operator reports the error (`status.restore.error`, from which
/// the RestoreFailed Event comes).
#[test]
fn an_unreadable_archive_stops_the_lead_before_its_broker_and_is_left_as_it_was() {
    let host = tempfile::tempdir().unwrap();
    let host_dir = host.path().display().to_string();
    let garbage = b"not a flux dump\n";
    std::fs::write(host.path().join("flux.tar.gz"), garbage).unwrap();
    let how = Start {
        lead: false,
        only_followers: Some(vec![]),
        ..Start::default()
    };
    let mut run = MiniClusterRun::start(
        minicluster(&with_archive("broken", 2, &host_dir, FLUXION)),
        how,
    );
    let failure = run
        .start_lead_allowing_init_failure()
        .expect("the archive init container fails");
    assert!(
        failure.contains(flux_operator::model::containers::ARCHIVE_INIT),
        "{failure}"
    );
    let restore = restore_status(&run).expect("a report of the failure");
    assert!(
        restore.error.contains("gzip") || restore.error.contains("tar"),
        "{restore:?}"
    );
    assert_eq!(restore.archive, "/state/flux.tar.gz");
    // The broker never ran, and the archive is as it was.
    assert!(
        !run.lead_log().contains("starting the lead broker"),
        "{}",
        run.lead_log()
    );
    assert_eq!(
        std::fs::read(host.path().join("flux.tar.gz")).unwrap(),
        garbage
    );
}

/// A save writes the archive's manifest (SHA-256, size, job count) beside it, last, and
/// reports itself (`status.lastSave`, from the Flux container's termination message). A
/// restore refuses an archive cut or changed after the save, as the init container's error,
/// before any broker starts: cut at a tar member boundary (which still lists its first
/// members) with and without its manifest, and one byte changed. The archive is left as it
/// was; the whole one restores. A save onto a volume too small for it fails, says so, and
/// leaves the archive and its manifest as they were.
#[test]
fn saves_are_sealed_and_reported_a_cut_or_changed_archive_is_refused_and_a_full_volume_keeps_the_old_one()
 {
    let host = tempfile::tempdir().unwrap();
    let host_dir = host.path().display().to_string();
    let yaml = |name: &str| {
        with_archive(name, 1, &host_dir, FLUXION).replace("/state/flux.tar.gz", "/state/flux.tar")
    };
    let archive = host.path().join("flux.tar");
    let manifest = host.path().join("flux.tar.manifest.json");

    let save = MiniClusterRun::start(minicluster(&yaml("seal")), Start::default());
    run_two_jobs_and_save(&save);
    let saved = lead_save(&[Arc::new(BrokerPod::from(save.lead_pod_status()))], "seal")
        .expect("a save report");
    drop(save);
    let whole = std::fs::read(&archive).expect("the save wrote the archive");
    assert!(saved.saved && saved.error.is_empty(), "{saved:?}");
    assert_eq!(
        (saved.jobs, saved.bytes),
        (2, whole.len() as i64),
        "{saved:?}"
    );
    let sealed: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&manifest).expect("and its manifest")).unwrap();
    assert_eq!(sealed["bytes"], whole.len(), "{sealed}");
    assert_eq!(sealed["jobs"], 2, "{sealed}");
    let sealed_text = std::fs::read(&manifest).unwrap();

    // Where the last member starts: a cut there leaves a tar of the first members.
    let boundary = {
        let mut tar = tar_offsets(&whole);
        tar.pop().expect("members")
    };
    let mut changed = whole.clone();
    changed[whole.len() / 3] ^= 0x20;
    // (what it proves, the archive, with its manifest, the error says)
    let cases = [
        (
            "cut, with its manifest",
            whole[..boundary].to_vec(),
            true,
            "does not match its manifest",
        ),
        (
            "cut, manifest lost",
            whole[..boundary].to_vec(),
            false,
            "truncated",
        ),
        (
            "one byte changed",
            changed,
            true,
            "does not match its manifest",
        ),
    ];
    for (i, (what, bytes, with_manifest, error)) in cases.into_iter().enumerate() {
        std::fs::write(&archive, &bytes).unwrap();
        if with_manifest {
            std::fs::write(&manifest, &sealed_text).unwrap();
        } else {
            let _ = std::fs::remove_file(&manifest);
        }
        let restore = refused_before_any_broker(&yaml(&format!("bad-{i}")), &archive, what);
        assert!(restore.error.contains(error), "{what}: {restore:?}");
        assert_eq!(
            std::fs::read(&archive).unwrap(),
            bytes,
            "{what}: left as it was"
        );
    }

    // The whole archive, on a volume with room for it and little more: it restores, and
    // the save of a bigger queue fails for want of space, reported, the archive unchanged.
    let _small = SmallVolume::mount(host.path(), whole.len() + 16 * 1024);
    std::fs::write(&archive, &whole).unwrap();
    std::fs::write(&manifest, &sealed_text).unwrap();
    let run = MiniClusterRun::start(minicluster(&yaml("whole")), Start::default());
    run.wait_flux("jobs -a -no {id}", RUN, |o| o.lines().count() == 2);
    let restore = restore_status(&run).expect("a report");
    assert_eq!(
        (restore.error.as_str(), restore.ended_jobs),
        ("", 2),
        "{restore:?}"
    );
    for _ in 0..60 {
        run.flux_ok("submit --wait true");
    }
    run.shutdown();
    // Flux's rc3 fails with the dump (`flux-dump: Write error`), and so does the broker.
    assert_eq!(run.wait_lead(RUN), 1, "{}", run.debug());
    let failed = lead_save(&[Arc::new(BrokerPod::from(run.lead_pod_status()))], "whole")
        .expect("a save report");
    assert!(
        !failed.saved && failed.error.contains("unchanged"),
        "{failed:?}\n{}",
        run.debug()
    );
    assert_eq!(
        std::fs::read(&archive).unwrap(),
        whole,
        "the archive is unchanged"
    );
    assert_eq!(std::fs::read(&manifest).unwrap(), sealed_text);
}

/// A tmpfs of `bytes` over a directory, for as long as it lives: a volume that fills up.
struct SmallVolume(std::path::PathBuf);

impl SmallVolume {
    fn mount(dir: &std::path::Path, bytes: usize) -> Self {
        let status = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={bytes}")])
            .arg("tmpfs")
            .arg(dir)
            .status()
            .expect("mount runs");
        assert!(status.success(), "mount a tmpfs on {}", dir.display());
        Self(dir.to_path_buf())
    }
}

impl Drop for SmallVolume {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
    }
}

/// The offsets of the headers of an uncompressed tar's members.
fn tar_offsets(tar: &[u8]) -> Vec<usize> {
    let mut offsets = Vec::new();
    let mut at = 0;
    while at + 512 <= tar.len() && tar[at..at + 512].iter().any(|b| *b != 0) {
        offsets.push(at);
        let size = std::str::from_utf8(&tar[at + 124..at + 136])
            .ok()
            .and_then(|s| {
                usize::from_str_radix(s.trim_matches(|c: char| c == '\0' || c == ' '), 8).ok()
            })
            .unwrap_or(0);
        at += 512 + size.div_ceil(512) * 512;
    }
    offsets
}

/// A restore into a cluster smaller than some pending jobs ask for: those are reported by id
/// (`status.restore.unfitJobs`) and not counted as resumed; the others are.
#[test]
fn a_restore_into_a_smaller_cluster_reports_the_jobs_that_can_never_fit_by_id() {
    let host = tempfile::tempdir().unwrap();
    let host_dir = host.path().display().to_string();
    let yaml = |name: &str, size: i32| {
        with_archive(name, size, &host_dir, FLUXION).replace(
            "    path: /state/flux.tar.gz\n",
            "    path: /state/flux.tar.gz\n    runningJobs: Cancel\n",
        )
    };
    let a = MiniClusterRun::start(minicluster(&yaml("wide", 3)), Start::default());
    a.wait_flux("resource list -s up -no {nnodes}", RUN, |o| o.trim() == "3");
    let blocker = a.flux_ok("submit -N3 sleep 600").trim().replace('ƒ', "f");
    a.wait_flux(&format!("jobs -no {{state}} {blocker}"), RUN, |o| {
        o.trim() == "RUN"
    });
    let wide: Vec<String> = (0..2)
        .map(|_| a.flux_ok("submit -N3 true").trim().replace('ƒ', "f"))
        .collect();
    let narrow: Vec<String> = (0..2)
        .map(|_| a.flux_ok("submit -N2 true").trim().replace('ƒ', "f"))
        .collect();
    a.shutdown();
    assert_eq!(a.wait_lead(RUN), 0, "{}", a.debug());
    drop(a);

    let b = MiniClusterRun::start(minicluster(&yaml("narrow", 2)), Start::default());
    let restore = restore_status(&b).expect("a report");
    let mut unfit = restore.unfit_jobs.clone();
    unfit.sort();
    let mut want = wide.clone();
    want.sort();
    assert_eq!(unfit, want, "{restore:?}");
    assert_eq!(
        (restore.pending_jobs, restore.canceled_jobs),
        (2, 1),
        "{restore:?}"
    );
    for id in &narrow {
        assert_eq!(b.wait_job_result(id, RUN), "COMPLETED", "{}", b.debug());
    }
    b.shutdown();
    assert_eq!(b.wait_lead(RUN), 0, "{}", b.debug());
}

/// A compressed archive (`.tar.gz`, as the Go operator's examples name it) cut short or with
/// one byte changed is refused before any broker starts, with its manifest and without it:
/// gzip's own check (its CRC and length at the end) fails where the tar still lists members.
/// The archive is left as it was.
#[test]
fn a_compressed_archive_cut_or_changed_is_refused_with_and_without_its_manifest() {
    let host = tempfile::tempdir().unwrap();
    let host_dir = host.path().display().to_string();
    let yaml = |name: &str| with_archive(name, 1, &host_dir, FLUXION);
    let archive = host.path().join("flux.tar.gz");
    let manifest = host.path().join("flux.tar.gz.manifest.json");

    let save = MiniClusterRun::start(minicluster(&yaml("gz")), Start::default());
    run_two_jobs_and_save(&save);
    drop(save);
    let whole = std::fs::read(&archive).expect("the save wrote the archive");
    assert_eq!(&whole[..2], b"\x1f\x8b", "gzip, by its name");
    let sealed = std::fs::read(&manifest).expect("and its manifest");

    let changed = |at: usize| {
        let mut bytes = whole.clone();
        bytes[at] ^= 0x01;
        bytes
    };
    let cut = whole[..whole.len() - 8].to_vec();
    // (what it proves, the archive, with its manifest, the error says)
    let cases = [
        (
            "cut, with its manifest",
            cut.clone(),
            true,
            "does not match its manifest",
        ),
        (
            "cut, manifest lost",
            cut,
            false,
            "ended before the end-of-stream marker",
        ),
        (
            "a byte of the data changed, with its manifest",
            changed(whole.len() / 2),
            true,
            "does not match its manifest",
        ),
        (
            "gzip's CRC changed, manifest lost",
            changed(whole.len() - 6),
            false,
            "CRC check failed",
        ),
    ];
    for (i, (what, bytes, with_manifest, error)) in cases.into_iter().enumerate() {
        std::fs::write(&archive, &bytes).unwrap();
        if with_manifest {
            std::fs::write(&manifest, &sealed).unwrap();
        } else {
            let _ = std::fs::remove_file(&manifest);
        }
        let restore = refused_before_any_broker(&yaml(&format!("gz-{i}")), &archive, what);
        assert!(restore.error.contains(error), "{what}: {restore:?}");
        assert_eq!(
            std::fs::read(&archive).unwrap(),
            bytes,
            "{what}: left as it was"
        );
    }
}

/// Start a MiniCluster of `yaml` whose lead must refuse the archive at `archive`: its archive
/// init container fails, no broker starts, and the restore report says why (returned).
fn refused_before_any_broker(yaml: &str, archive: &std::path::Path, what: &str) -> RestoreStatus {
    let before = std::fs::read(archive).ok();
    let how = Start {
        lead: false,
        only_followers: Some(vec![]),
        ..Start::default()
    };
    let mut run = MiniClusterRun::start(minicluster(yaml), how);
    assert!(
        run.start_lead_allowing_init_failure().is_some(),
        "{what}: the init container passed"
    );
    let restore = restore_status(&run).expect("a report of the failure");
    assert!(
        !run.lead_log().contains("starting the lead broker"),
        "{what}"
    );
    drop(run);
    assert_eq!(
        std::fs::read(archive).ok(),
        before,
        "{what}: left as it was"
    );
    restore
}

/// The lead pod killed in the middle of its save (its grace period over while `flux dump`
/// writes, as the kubelet's SIGKILL does): the archive and its manifest stay those of the
/// save before, byte for byte, and the partial dump beside them tells the next restore that
/// the last save was cut off. That restore is refused, naming the partial dump and what
/// taking the older archive would mean, before any broker starts; once the partial dump is
/// deleted (the user's decision), the older archive restores its jobs.
#[test]
fn a_lead_killed_in_its_dump_leaves_the_save_before_and_the_next_restore_refuses_it_until_told() {
    let host = tempfile::tempdir().unwrap();
    let host_dir = host.path().display().to_string();
    // Uncompressed: flux dump writes a tar as it goes, where gzip's output waits in a
    // buffer until the end, so the kill finds part of the dump on disk.
    let yaml = |name: &str| {
        with_archive(name, 1, &host_dir, FLUXION).replace("/state/flux.tar.gz", "/state/flux.tar")
    };
    let archive = host.path().join("flux.tar");
    let manifest = host.path().join("flux.tar.manifest.json");
    let partial = host.path().join(".partial-flux.tar");

    let first = MiniClusterRun::start(minicluster(&yaml("first")), Start::default());
    first.wait_flux("resource list -s up -no {nnodes}", RUN, |o| o.trim() == "1");
    for _ in 0..2 {
        first.flux_ok("run true");
    }
    first.shutdown();
    assert_eq!(first.wait_lead(RUN), 0, "{}", first.debug());
    drop(first);
    let (saved, sealed) = (
        std::fs::read(&archive).unwrap(),
        std::fs::read(&manifest).unwrap(),
    );

    // The next cluster restores the 2 jobs and runs 40 more; its pod is deleted, and the
    // kill comes while its dump has written part of the archive.
    let second = MiniClusterRun::start(minicluster(&yaml("second")), Start::default());
    second.wait_flux("jobs -a -no {id}", RUN, |o| o.lines().count() == 2);
    second.flux_ok("submit --cc=1-40 --wait --quiet true");
    second.delete_lead_killing_during(&["flux", "dump"], || {
        std::fs::metadata(&partial).is_ok_and(|m| m.len() > 0)
    });
    drop(second);
    assert_eq!(
        std::fs::read(&archive).unwrap(),
        saved,
        "the save before, unchanged"
    );
    assert_eq!(
        std::fs::read(&manifest).unwrap(),
        sealed,
        "and its manifest"
    );
    assert!(partial.exists(), "the cut dump is left beside it");

    let restore =
        refused_before_any_broker(&yaml("third"), &archive, "the restore of the older save");
    for words in [
        "the last save was cut off",
        "/state/.partial-flux.tar",
        "run again the jobs that ended since",
        "Delete /state/.partial-flux.tar to go on anyway",
    ] {
        assert!(restore.error.contains(words), "{words:?}: {restore:?}");
    }
    assert_eq!(std::fs::read(&archive).unwrap(), saved, "left as it was");

    std::fs::remove_file(&partial).unwrap();
    let fourth = MiniClusterRun::start(minicluster(&yaml("fourth")), Start::default());
    fourth.wait_flux("jobs -a -no {id}", RUN, |o| o.lines().count() == 2);
    let restore = restore_status(&fourth).expect("a report");
    assert_eq!(
        (restore.error.as_str(), restore.ended_jobs),
        ("", 2),
        "{restore:?}"
    );
}

/// An interactive cluster's lead keeps the instance's state in its pod (`statedir` on an
/// emptyDir, a KVS checkpoint every second): its broker killed (`kill -9`, as an OOM kill
/// does), the kubelet restarts the container and the same instance starts again, with its
/// job history and its queue (a held job keeps its id and stays pending). A job that
/// completed two seconds before stays completed; the job that was running ends with an
/// exception that names the restart. Before, the restart started an empty instance; then,
/// with a checkpoint every 10 s, a job that had just completed came back failed.
#[test]
fn an_interactive_lead_broker_killed_in_its_container_starts_again_with_its_history_and_queue() {
    let yaml = "apiVersion: flux-framework.org/v1alpha2
kind: MiniCluster
metadata:
  name: kept
spec:
  size: 1
  interactive: true
  containers:
    - image: rockylinux:9
";
    let run = MiniClusterRun::start(minicluster(yaml), Start::default());
    kept_across_a_restart(&run, &[]);
}

/// The same with `spec.archive`: the instance restored from the archive at the pod's start
/// starts again from the state it kept, which is newer, not from the archive (whose one job
/// is also in the kept history).
#[test]
fn with_an_archive_the_kept_state_wins_over_the_archive_on_a_restart_in_the_pod() {
    let host = tempfile::tempdir().unwrap();
    let host_dir = host.path().display().to_string();
    let first = MiniClusterRun::start(
        minicluster(&with_archive("saved", 1, &host_dir, FLUXION)),
        Start::default(),
    );
    first.wait_flux("resource list -s up -no {nnodes}", RUN, |o| o.trim() == "1");
    let saved = first.flux_ok("submit --wait true").trim().replace('ƒ', "f");
    first.shutdown();
    assert_eq!(first.wait_lead(RUN), 0, "{}", first.debug());
    drop(first);

    let run = MiniClusterRun::start(
        minicluster(&with_archive("kept", 1, &host_dir, FLUXION)),
        Start::default(),
    );
    kept_across_a_restart(&run, &[saved.as_str()]);
    assert!(
        run.lead_log().contains(
            "not restoring /state/flux.tar.gz: the instance's own state in this pod is newer"
        ),
        "{}",
        run.lead_log()
    );
}

/// In the running interactive `run`: a completed, a running and a held job; past a
/// checkpoint, `kill -9` of the lead broker; the container restarts and the instance has
/// them all (and `before`, completed jobs it had already): the running one failed, the held
/// one pending under its id, and it runs when released.
fn kept_across_a_restart(run: &MiniClusterRun, before: &[&str]) {
    run.wait_flux("resource list -s up -no {nnodes}", RUN, |o| o.trim() == "1");
    let done = run.flux_ok("submit --wait true").trim().replace('ƒ', "f");
    let running = run.flux_ok("submit sleep 600").trim().replace('ƒ', "f");
    let held = run
        .flux_ok("submit --urgency=hold true")
        .trim()
        .replace('ƒ', "f");
    run.wait_flux(&format!("jobs -no {{state}} {running}"), RUN, |o| {
        o.trim() == "RUN"
    });
    // Past a KVS checkpoint (every second).
    std::thread::sleep(Duration::from_secs(2));

    run.kill_in_lead(&["flux-broker"], "KILL");
    let c = run.flux_container();
    let deadline = std::time::Instant::now() + RUN;
    while run.lead().restarts(&c) == 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(run.lead().restarts(&c), 1, "{}", run.debug());
    let count = 3 + before.len();
    // The restarted job manager fails the running job once its exec service says hello,
    // a moment after the instance answers: wait for every job to be listed and that job
    // to have left RUN.
    let states = run
        .wait_flux("jobs -a -no {id},{state},{result}", RUN, |o| {
            o.lines().count() == count && !o.lines().any(|l| l.contains(",RUN,"))
        })
        .replace('ƒ', "f");
    let state_of = |id: &str| {
        states
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{id},")))
            .unwrap_or_else(|| panic!("{id} is gone: {states}"))
            .to_string()
    };
    for id in before.iter().copied().chain([done.as_str()]) {
        assert_eq!(state_of(id), "INACTIVE,COMPLETED", "{id}: {states}");
    }
    assert_eq!(state_of(&running), "INACTIVE,FAILED", "{states}");
    let ended = run.flux_ok(&format!("job eventlog {running}"));
    assert!(
        ended.contains("type=\"restart\"") && ended.contains(flux_operator::flux::RESTART_NOTE),
        "the running job's end names the restart:\n{ended}"
    );
    assert!(!ended.contains("guest ns"), "{ended}");
    assert_eq!(state_of(&held), "SCHED,", "{states}");
    assert!(
        run.lead_log()
            .contains("starting the instance again from the state it kept"),
        "{}",
        run.lead_log()
    );
    // The crashed run counted, in the state it left, what the new instance holds: the
    // operator's status.instance.lastRestart (kept, resumed, lost) comes from this.
    let message = run.lead().last_termination_message(&c);
    let counted = flux_operator::flux::JobsReport::parse(&message).unwrap_or_else(|| {
        panic!(
            "no job count in the crashed run's message {message:?}\n{}",
            run.lead_log()
        )
    });
    let ended = states.lines().filter(|l| l.contains(",INACTIVE,")).count() - 1;
    let expected = flux_operator::flux::JobsReport {
        source: flux_operator::flux::JobsSource::Checkpoint,
        pending: 1,
        running: 1,
        ended: i32::try_from(ended).unwrap(),
    };
    assert_eq!(counted, expected, "{states}");
    // The queue still works: the held job runs once released, on the resources the ended
    // job gave back.
    run.flux_ok(&format!("job urgency {held} default"));
    assert_eq!(run.wait_job_result(&held, RUN), "COMPLETED");
    let whole = run
        .flux_ok("submit --wait --exclusive -N1 true")
        .trim()
        .replace('ƒ', "f");
    assert_eq!(run.wait_job_result(&whole, RUN), "COMPLETED");
}

/// An interactive cluster without an archive whose lead pod is deleted (by hand, evicted):
/// before its broker stops, the lead counts what its instance holds (a completed, a running
/// and a held job) into its termination message, from which the operator says how many jobs
/// the replacement has no record of. The new lead's instance, joined by the follower, holds
/// none of them.
#[test]
fn a_deleted_lead_pod_without_an_archive_counts_the_jobs_its_instance_held() {
    let yaml = "apiVersion: flux-framework.org/v1alpha2
kind: MiniCluster
metadata:
  name: counted
spec:
  size: 2
  interactive: true
  containers:
    - image: rockylinux:9
";
    let mut run = MiniClusterRun::start(minicluster(yaml), Start::default());
    run.wait_flux("resource list -s up -no {nnodes}", RUN, |o| o.trim() == "2");
    run.flux_ok("submit --wait true");
    let running = run.flux_ok("submit sleep 600").trim().replace('ƒ', "f");
    run.flux_ok("submit --urgency=hold true");
    run.wait_flux(&format!("jobs -no {{state}} {running}"), RUN, |o| {
        o.trim() == "RUN"
    });

    let old = run.lead().clone();
    old.delete(old.termination_grace());
    let c = run.flux_container();
    let message = old.termination_message(&c);
    let counted = flux_operator::flux::JobsReport::parse(&message)
        .unwrap_or_else(|| panic!("no job count in {message:?}\n{}", run.debug()));
    let expected = flux_operator::flux::JobsReport {
        source: flux_operator::flux::JobsSource::Instance,
        pending: 1,
        running: 1,
        ended: 1,
    };
    assert_eq!(counted, expected);

    run.start_lead();
    run.wait_flux("resource list -s up -no {nnodes}", RUN, |o| o.trim() == "2");
    assert_eq!(run.flux_ok("jobs -a -no {id}").trim(), "", "a new instance");
}

/// The standard output of `sh -c SCRIPT`, as a number.
fn count(script: &str) -> i64 {
    let out = std::process::Command::new("sh")
        .args(["-c", script])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

/// An archive over a bound of `spec.archive.restoreLimits` is refused before any broker
/// starts, and the report (`status.restore.error`, which the `Restored` condition and the
/// `RestoreFailed` Event carry) names the bound by its field path: a real save of two jobs
/// with the members bound one under its member count, then the bytes bound one under its
/// size decompressed; and a reading that does not end within `seconds` (the archive a named
/// pipe no one writes to). At exactly its count and size, the same archive restores both
/// jobs.
#[test]
fn an_archive_over_a_restore_bound_is_refused_before_any_broker_naming_the_bound() {
    let host = tempfile::tempdir().unwrap();
    let host_dir = host.path().display().to_string();
    let archive = host.path().join("flux.tar.gz");
    let limited = |name: &str, members: i64, bytes: i64| {
        with_archive(name, 1, &host_dir, SIMPLE).replace(
            "    path: /state/flux.tar.gz\n",
            &format!(
                "    path: /state/flux.tar.gz\n    \
                 restoreLimits: {{members: {members}, bytes: {bytes}, seconds: 5}}\n"
            ),
        )
    };

    let save = MiniClusterRun::start(
        minicluster(&with_archive("bounds", 1, &host_dir, SIMPLE)),
        Start::default(),
    );
    run_two_jobs_and_save(&save);
    drop(save);
    let path = archive.display();
    let members = count(&format!("tar -tzf '{path}' | wc -l"));
    let bytes = count(&format!("gzip -dc '{path}' | wc -c"));
    assert!(
        members > 2 && bytes > 1024,
        "{members} members, {bytes} bytes"
    );

    // (what, the members bound, the bytes bound, the bound the error names)
    let over = [
        (
            "one member over",
            members - 1,
            bytes,
            format!("over spec.archive.restoreLimits.members ({})", members - 1),
        ),
        (
            "one byte over",
            members,
            bytes - 1,
            format!("over spec.archive.restoreLimits.bytes ({})", bytes - 1),
        ),
    ];
    for (i, (what, m, b, bound)) in over.into_iter().enumerate() {
        let restore =
            refused_before_any_broker(&limited(&format!("over-{i}"), m, b), &archive, what);
        assert!(restore.error.starts_with(&bound), "{what}: {restore:?}");
    }

    // At exactly its count and size: restored, both jobs there.
    let run = MiniClusterRun::start(
        minicluster(&limited("at-bounds", members, bytes)),
        Start::default(),
    );
    run.wait_flux("jobs -a -no {id}", RUN, |o| o.lines().count() == 2);
    let restore = restore_status(&run).expect("a report of the archive");
    assert_eq!(
        (restore.error.as_str(), restore.ended_jobs),
        ("", 2),
        "{restore:?}"
    );
    drop(run);

    // A reading that never ends: the check's alarm ends it.
    std::fs::remove_file(&archive).unwrap();
    let _ = std::fs::remove_file(host.path().join("flux.tar.gz.manifest.json"));
    let made = std::process::Command::new("mkfifo")
        .arg(&archive)
        .status()
        .unwrap();
    assert!(made.success());
    let how = Start {
        lead: false,
        only_followers: Some(vec![]),
        ..Start::default()
    };
    let mut run = MiniClusterRun::start(minicluster(&limited("never-ends", members, bytes)), how);
    let started = std::time::Instant::now();
    assert!(
        run.start_lead_allowing_init_failure().is_some(),
        "the check passed"
    );
    let restore = restore_status(&run).expect("a report of the failure");
    assert!(
        restore
            .error
            .starts_with("over spec.archive.restoreLimits.seconds (5)"),
        "{restore:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "{:?}",
        started.elapsed()
    );
    assert!(!run.lead_log().contains("starting the lead broker"));
}
