//! The MPI Operator's arm of `benches/hpc.rs`: Kubeflow's MPI Operator v2 (v0.6.0, its
//! controller built by `e2e/build-mpi-operator.sh` from its Go module), run as a process
//! beside the cluster for one namespace, and an MPIJob with two workers of one slot each as
//! its users write one: the launcher runs `mpirun`, which starts the ranks on the workers over
//! ssh (the MPI image carries sshd), the same image, input and limits as the MiniClusters.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use anyhow::{Context, Result, ensure};

use crate::arms::{LIMIT, now, pods};
use crate::cluster::{apply_yaml, kubectl, kubectl_in, on_real_node, root};
use crate::common::{TestNamespace, spawn_logged, wait_for};

const JOB: &str = "hpc";

/// The built controller and its CRD, from `e2e/build-mpi-operator.sh`.
pub struct MpiOperator {
    dir: PathBuf,
}

/// The controller process, killed when dropped.
struct Controller(Child);

impl Drop for Controller {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One MPIJob: the launcher's script, the image of its pods, the MPI its `mpirun` is
/// (`OpenMPI` or `MPICH`: how the MPI Operator writes the hostfile and which variables
/// point to it), and a file the workers read at /bench/in.lj, if any.
pub struct Job<'a> {
    pub script: &'a str,
    pub image: &'a str,
    pub implementation: &'a str,
    pub input: Option<&'a Path>,
}

/// What the launcher printed, and when the MPIJob was applied (seconds since the epoch).
pub struct Launched {
    pub applied: f64,
    pub log: String,
    pub down: f64,
}

impl MpiOperator {
    /// Builds (or finds) the controller and installs the MPIJob CRD (server-side: it is too
    /// large for `kubectl apply`'s annotation).
    pub fn install() -> Result<Self> {
        let out = Command::new(root().join("e2e/build-mpi-operator.sh"))
            .stderr(Stdio::inherit())
            .output()
            .context("running e2e/build-mpi-operator.sh")?;
        ensure!(out.status.success(), "e2e/build-mpi-operator.sh failed");
        let dir = PathBuf::from(String::from_utf8(out.stdout)?.trim());
        let crd = dir.join("src/manifests/base/kubeflow.org_mpijobs.yaml");
        let crd = crd.to_string_lossy();
        kubectl(["apply", "--server-side", "--force-conflicts", "-f", &crd])?;
        // `kubectl wait` fails at once on a CRD with no conditions yet: try again a while.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while let Err(error) = kubectl([
            "wait",
            "--for=condition=Established",
            "crd/mpijobs.kubeflow.org",
            "--timeout=60s",
        ]) {
            ensure!(std::time::Instant::now() < deadline, error);
            std::thread::sleep(std::time::Duration::from_secs(1));
        }
        Ok(Self { dir })
    }

    async fn start(&self, ns: &str) -> Result<Controller> {
        let log = std::env::temp_dir().join(format!("mpi-operator-{ns}.log"));
        let mut cmd = Command::new(self.dir.join("bin/mpi-operator"));
        let kubeconfig = std::env::var("KUBECONFIG").context("KUBECONFIG")?;
        cmd.arg(format!("-kubeConfig={kubeconfig}"))
            .arg(format!("-namespace={ns}"))
            .arg(format!("-lock-namespace={ns}"))
            .arg("-alsologtostderr");
        let child = spawn_logged(&mut cmd, std::fs::File::create(&log)?)?;
        let controller = Controller(child);
        wait_for("the MPI Operator's workers", LIMIT, || async {
            let text = std::fs::read_to_string(&log)?;
            Ok(text.contains("Started workers").then_some(()))
        })
        .await?;
        Ok(controller)
    }

    /// Runs JOB, a fresh MPIJob in a namespace of its own.
    pub async fn run(&self, job: &Job<'_>) -> Result<Launched> {
        let ns = TestNamespace::create("hpc-mpijob").await?;
        on_real_node(&ns.name)?;
        if let Some(input) = job.input {
            let from_file = format!("--from-file=in.lj={}", input.display());
            kubectl_in(&ns.name, &["create", "configmap", "lj", &from_file])?;
        }
        let _controller = self.start(&ns.name).await?;

        let applied = now();
        apply_yaml(&ns.name, &mpijob(job))?;
        wait_for("the MPIJob to succeed", LIMIT, || async {
            let json = kubectl_in(&ns.name, &["get", "mpijob", JOB, "-o", "json"])?;
            let job: serde_json::Value = serde_json::from_str(&json)?;
            let conditions = job["status"]["conditions"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            let is = |t: &str| {
                conditions
                    .iter()
                    .any(|c| c["type"] == t && c["status"] == "True")
            };
            ensure!(!is("Failed"), "the MPIJob failed: {json}");
            Ok(is("Succeeded").then_some(()))
        })
        .await?;
        let log = kubectl_in(&ns.name, &["logs", &format!("job/{JOB}-launcher")])?;

        let t1 = now();
        kubectl_in(&ns.name, &["delete", "mpijob", JOB, "--wait=false"])?;
        wait_for("every pod gone", LIMIT, || async {
            Ok(pods(&ns.name)?.is_empty().then_some(()))
        })
        .await?;
        let down = now() - t1;
        ns.cleanup().await;
        Ok(Launched { applied, log, down })
    }
}

/// An MPIJob of two workers (one slot each, one CPU each as the MiniClusters' pods) and a
/// launcher that runs the job's script with bash.
fn mpijob(job: &Job<'_>) -> String {
    let script: String = job
        .script
        .lines()
        .map(|l| format!("              {l}\n"))
        .collect();
    let (volumes, mounts) = if job.input.is_some() {
        (
            "          volumes:\n          - name: input\n            configMap: {name: lj}\n",
            "            volumeMounts:\n            - {name: input, mountPath: /bench}\n",
        )
    } else {
        ("", "")
    };
    let (image, implementation) = (job.image, job.implementation);
    let limits = crate::cpu_limit();
    format!(
        r#"apiVersion: kubeflow.org/v2beta1
kind: MPIJob
metadata:
  name: {JOB}
spec:
  slotsPerWorker: 1
  mpiImplementation: {implementation}
  launcherCreationPolicy: WaitForWorkersReady
  runPolicy: {{cleanPodPolicy: None, backoffLimit: 0}}
  mpiReplicaSpecs:
    Launcher:
      replicas: 1
      template:
        spec:
          containers:
          - name: launcher
            image: {image}
            resources: {{requests: {{cpu: 100m}}}}
            command:
            - bash
            - -c
            - |
{script}
    Worker:
      replicas: 2
      template:
        spec:
{volumes}          containers:
          - name: worker
            image: {image}
            command: [/usr/sbin/sshd, -De]
            resources:
              requests: {{cpu: 100m}}
              limits: {limits}
{mounts}"#
    )
}
