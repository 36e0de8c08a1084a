//! `kubectl flux list`: the MiniClusters as a table of their size, ready brokers, phase and
//! job counts (`flux jobs --stats-only` in each reachable lead pod).

use std::process::{Command, Stdio};

use anyhow::{Context, Result};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, PartialObjectMeta};

use flux_operator::api::{MiniCluster, NAME_LABEL, Phase};
use flux_operator::jobset::JobSet;

use crate::args::{KubeArgs, ListArgs};
use crate::connect;
use crate::remote::{exec_args, kubectl};
use crate::target::{Target, lead_selector, own_pods, qualified, target};

/// `X running, Y completed, Z failed, W pending, ...` from `flux jobs --stats-only`.
#[derive(Debug, Clone, Default, PartialEq)]
struct JobCounts {
    pending: u64,
    running: u64,
    completed: u64,
    failed: u64,
}

fn parse_stats(text: &str) -> Option<JobCounts> {
    let mut counts = JobCounts::default();
    let mut seen = 0;
    for part in text.trim().split(',') {
        let mut words = part.split_whitespace();
        let (Some(n), Some(what)) = (words.next(), words.next()) else {
            continue;
        };
        let Ok(n) = n.parse() else { continue };
        let slot = match what {
            "pending" => &mut counts.pending,
            "running" => &mut counts.running,
            "completed" => &mut counts.completed,
            "failed" => &mut counts.failed,
            _ => continue,
        };
        *slot = n;
        seen += 1;
    }
    (seen == 4).then_some(counts)
}

/// A table with columns padded to their widest cell, as kubectl prints one.
fn table(rows: &[Vec<String>]) -> String {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|i| {
            rows.iter()
                .filter_map(|r| r.get(i))
                .map(|c| c.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for row in rows {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            line.push_str(cell);
            if i + 1 < row.len() {
                let pad = widths[i] - cell.chars().count() + 3;
                line.push_str(&" ".repeat(pad));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

pub(crate) async fn list(kube: &KubeArgs, args: ListArgs) -> Result<u8> {
    let (client, namespace) = connect(kube).await?;
    let (mcs, pods, jobsets): (Api<MiniCluster>, Api<Pod>, Api<JobSet>) = if args.all_namespaces {
        (
            Api::all(client.clone()),
            Api::all(client.clone()),
            Api::all(client),
        )
    } else {
        (
            Api::namespaced(client.clone(), &namespace),
            Api::namespaced(client.clone(), &namespace),
            Api::namespaced(client, &namespace),
        )
    };
    let mut items = mcs
        .list(&ListParams::default())
        .await
        .context("listing MiniClusters")?
        .items;
    items.sort_by_key(qualified);
    if items.is_empty() {
        if args.all_namespaces {
            eprintln!("No MiniClusters found.");
        } else {
            eprintln!("No MiniClusters found in namespace {namespace}.");
        }
        return Ok(0);
    }
    let counts = if args.no_jobs {
        vec![None; items.len()]
    } else {
        let leads = pods
            .list(&ListParams::default().labels(&lead_selector("")))
            .await
            .context("listing lead pods")?
            .items;
        let jobsets = jobsets
            .list_metadata(&ListParams::default().labels(NAME_LABEL))
            .await
            .context("listing the MiniClusters' JobSets")?
            .items;
        job_counts(kube, &items, &jobsets, &leads)
    };
    let mut header = vec!["NAME", "SIZE", "READY", "PHASE"];
    if args.all_namespaces {
        header.insert(0, "NAMESPACE");
    }
    if !args.no_jobs {
        header.extend(["PENDING", "RUNNING", "COMPLETED", "FAILED"]);
    }
    let mut rows = vec![header.into_iter().map(String::from).collect::<Vec<_>>()];
    for (mc, counts) in items.iter().zip(counts) {
        let status = mc.status.clone().unwrap_or_default();
        let mut row = vec![
            mc.name().to_string(),
            mc.spec.size.to_string(),
            status.ready_brokers.to_string(),
            status.phase.map_or("", Phase::as_str).to_string(),
        ];
        if args.all_namespaces {
            row.insert(0, mc.namespace_or_default().to_string());
        }
        if !args.no_jobs {
            match counts {
                Some(c) => {
                    row.extend([c.pending, c.running, c.completed, c.failed].map(|n| n.to_string()))
                }
                None => row.extend(["-"; 4].map(String::from)),
            }
        }
        rows.push(row);
    }
    print!("{}", table(&rows));
    Ok(0)
}

/// `flux jobs --stats-only` in the lead pod of each reachable MiniCluster, a few at a time
/// (one `kubectl exec` each); `None` where it is not reachable or did not answer.
fn job_counts(
    kube: &KubeArgs,
    items: &[MiniCluster],
    jobsets: &[PartialObjectMeta<JobSet>],
    leads: &[Pod],
) -> Vec<Option<JobCounts>> {
    const AT_ONCE: usize = 8;
    let targets: Vec<Option<Target>> = items
        .iter()
        .map(|mc| target(mc, &own_pods(mc, jobsets, leads)).ok())
        .collect();
    let mut out = Vec::with_capacity(items.len());
    for chunk in targets.chunks(AT_ONCE) {
        let children: Vec<_> = chunk
            .iter()
            .map(|t| {
                t.as_ref().and_then(|t| {
                    Command::new(kubectl())
                        .args(exec_args(
                            kube,
                            t,
                            false,
                            false,
                            "flux",
                            &["jobs".into(), "--stats-only".into()],
                        ))
                        .stdin(Stdio::null())
                        .stdout(Stdio::piped())
                        .stderr(Stdio::null())
                        .spawn()
                        .ok()
                })
            })
            .collect();
        for child in children {
            // `--stats-only` exits 1 when no job is active: read the counts either way.
            out.push(
                child
                    .and_then(|c| c.wait_with_output().ok())
                    .and_then(|o| parse_stats(&String::from_utf8_lossy(&o.stdout))),
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::words;

    #[test]
    fn job_counts_are_read_from_flux_jobs_stats_only() {
        assert_eq!(
            parse_stats("1 running, 7 completed, 2 failed, 3 pending, 0 inactive purged\n"),
            Some(JobCounts {
                pending: 3,
                running: 1,
                completed: 7,
                failed: 2
            })
        );
        assert_eq!(parse_stats(""), None);
        assert_eq!(parse_stats("flux-jobs: error retrieving job stats"), None);
    }

    #[test]
    fn the_list_is_a_padded_table() {
        let rows = [words(&["NAME", "SIZE"]), words(&["interactive", "2"])].map(|r| {
            r.iter()
                .map(|w| w.to_string_lossy().into_owned())
                .collect::<Vec<_>>()
        });
        assert_eq!(table(&rows), "NAME          SIZE\ninteractive   2\n");
    }
}
