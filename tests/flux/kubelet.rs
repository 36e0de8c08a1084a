//! A pod emulator: runs the operator's rendered pods on this machine as a kubelet would,
//! with real processes in Linux namespaces (needs root).
//!
//! Per cluster ([`Network`]): a "switch" network namespace holding a bridge, so pod traffic
//! stays among the namespaces made here and never reaches the host's interfaces.
//!
//! Per pod ([`Pod`]):
//! - a network namespace with `lo` and `eth0` (a veth on the bridge, its own address);
//! - the pod's hostname (a UTS namespace per container, all set to the pod's hostname);
//! - `/etc/hosts` with the pod FQDNs of every pod of the subdomain that exists right now
//!   (as the headless Service's DNS does with `publishNotReadyAddresses`), rewritten in place
//!   when pods come and go;
//! - volumes laid out as the kubelet lays them out: an emptyDir is a directory owned by root
//!   with mode 0777 (group `fsGroup` and setgid with `fsGroup`), `medium: Memory` a tmpfs;
//!   ConfigMap and Secret volumes are the kubelet's atomic-writer layout (a timestamped
//!   directory with the files at `defaultMode` or the item's `mode`, a `..data` link to it,
//!   and one link per key), group `fsGroup` when set; an image volume (the flux view's,
//!   `flux.container.imageVolume`) is the image's `/opt` tree in place, nothing copied.
//!
//! Per container: a mount, UTS, IPC and PID namespace (the command is PID 1, as in a real
//! container, so SIGTERM without a handler is ignored), a root filesystem that is a fresh
//! tmpfs with the host's `/usr` (and its merged-`/usr` links) read-only, a private copy of
//! `/etc`, fresh `/tmp`, `/run`, `/var`, `/dev/shm` and `/proc`, the image's extra trees
//! (the flux view image's `/opt`), then each `volumeMount` (`readOnly`, `subPath`), and the
//! command, args, working directory and environment exactly as rendered (`$(VAR)`
//! references expanded as the kubelet does), as the user of the security context (pod and
//! container `runAsUser`, `runAsGroup`, `fsGroup` and `supplementalGroups` as groups,
//! `allowPrivilegeEscalation: false` as no_new_privs, `readOnlyRootFilesystem`).
//!
//! Init containers run first, one after another; then all containers start together.
//! `restartPolicy: OnFailure` restarts a container that exits non-zero, after a second.
//! Readiness probes (`exec` inside the container, `tcpSocket` to the pod address from its
//! network namespace) run at their period. Logs of each container go to a file.
//!
//! What it does not emulate: images (every container runs the host's `/usr`; the flux view
//! image adds its `/opt`), resource limits, cgroups, and any API object: the tests drive the
//! pods that the JobSet's Jobs would create.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;
use std::io::{Read as _, Write as _};
use std::net::Ipv4Addr;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{
    ConfigMap, Container, EnvVar, PodSecurityContext, PodSpec, Probe, Secret, Volume,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

/// The image a container runs: which extra trees appear in its root filesystem.
#[derive(Clone, Debug, Default)]
pub struct Images {
    /// Image name substring -> host directory bound read-only at `/opt` (the flux view
    /// image's `/opt/view` and `/opt/software`).
    pub opt_trees: Vec<(String, PathBuf)>,
}

impl Images {
    fn opt_for(&self, image: &str) -> Option<&Path> {
        self.opt_trees
            .iter()
            .find(|(pat, _)| image.contains(pat.as_str()))
            .map(|(_, p)| p.as_path())
    }
}

static NEXT_NETWORK: AtomicU32 = AtomicU32::new(0);

/// One cluster's private network: a switch namespace with a bridge, and the addresses
/// handed out on it.
pub struct Network {
    id: String,
    switch: String,
    next_host: Mutex<u8>,
    hosts: Mutex<BTreeMap<String, Ipv4Addr>>,
    dir: PathBuf,
}

fn run(cmd: &mut Command) -> Result<String, String> {
    let out = cmd.output().map_err(|e| format!("{cmd:?}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{cmd:?}: {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn sh(script: &str) -> Result<String, String> {
    run(Command::new("/bin/sh").arg("-ec").arg(script))
}

/// Single-quote a word for a POSIX shell.
pub fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The error for a volume of a kind the emulator does not lay out.
const NOT_EMULATED: &str =
    "only emptyDir, configMap, secret, hostPath and image volumes are emulated";

impl Network {
    /// A new network with its own bridge; `dir` holds the per-pod state.
    pub fn new(dir: &Path) -> Result<Arc<Network>, String> {
        let n = NEXT_NETWORK.fetch_add(1, Ordering::SeqCst);
        // Namespace names carry this process's PID, so a later run can tell leftovers of a
        // process that died (e2e/netns-clean.sh) from a run still going.
        let id = format!("{}-{n}", std::process::id());
        let switch = format!("fo{id}-sw");
        let _ = run(Command::new("ip").args(["netns", "del", &switch]));
        run(Command::new("ip").args(["netns", "add", &switch]))?;
        sh(&format!(
            "ip -n {switch} link set lo up; ip -n {switch} link add br0 type bridge; \
             ip -n {switch} link set br0 up"
        ))?;
        fs::create_dir_all(dir).map_err(|e| e.to_string())?;
        Ok(Arc::new(Network {
            id,
            switch,
            next_host: Mutex::new(10),
            hosts: Mutex::new(BTreeMap::new()),
            dir: dir.to_path_buf(),
        }))
    }

    /// Pod directories live here.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn attach(&self, pod_ns: &str) -> Result<Ipv4Addr, String> {
        let host = {
            let mut next = self.next_host.lock().unwrap();
            let h = *next;
            *next = next.checked_add(1).ok_or("out of addresses")?;
            h
        };
        let ip = Ipv4Addr::new(10, 213, 0, host);
        // Interface names are per namespace: only this network's switch holds these.
        let veth = format!("veth{host}");
        let sw = &self.switch;
        sh(&format!(
            "ip -n {sw} link add {veth} type veth peer name eth0 netns {pod_ns}; \
             ip -n {sw} link set {veth} master br0 up; \
             ip -n {pod_ns} link set lo up; \
             ip -n {pod_ns} addr add {ip}/24 dev eth0; \
             ip -n {pod_ns} link set eth0 up"
        ))?;
        Ok(ip)
    }

    /// Name -> address of every pod that exists now, for `/etc/hosts`.
    fn publish(&self, names: &[String], ip: Option<Ipv4Addr>) {
        let mut hosts = self.hosts.lock().unwrap();
        for name in names {
            match ip {
                Some(ip) => hosts.insert(name.clone(), ip),
                None => hosts.remove(name),
            };
        }
        let mut text = String::from("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost\n");
        let mut by_ip: BTreeMap<Ipv4Addr, Vec<&str>> = BTreeMap::new();
        for (name, ip) in hosts.iter() {
            by_ip.entry(*ip).or_default().push(name);
        }
        for (ip, names) in by_ip {
            let _ = writeln!(text, "{ip}\t{}", names.join(" "));
        }
        // Rewritten in place: containers bind this very file at /etc/hosts.
        let path = self.hosts_file();
        // Written over the old text, then cut to length: a resolver never sees it empty.
        let mut f = fs::OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(false)
            .open(&path)
            .expect("hosts file");
        f.write_all(text.as_bytes()).expect("write hosts file");
        f.set_len(text.len() as u64).expect("cut hosts file");
    }

    fn hosts_file(&self) -> PathBuf {
        self.dir.join("hosts")
    }
}

impl Drop for Network {
    fn drop(&mut self) {
        let _ = run(Command::new("ip").args(["netns", "del", &self.switch]));
    }
}

/// What the emulator needs to know of a pod besides its spec.
pub struct PodMeta {
    /// The pod's name (`<mc>-lead-0-0-abcde` in Kubernetes; here the hostname).
    pub name: String,
    /// `hostname` (JobSet sets `<jobset>-<rjob>-<job index>-<pod index>`).
    pub hostname: String,
    /// `subdomain` (the headless Service).
    pub subdomain: String,
    /// The namespace.
    pub namespace: String,
    /// The cluster DNS domain.
    pub cluster_domain: String,
}

/// A container's state as the kubelet reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum State {
    Waiting,
    Running,
    /// Exited with this code (terminated).
    Terminated(i32),
}

struct ContainerRun {
    state: State,
    restarts: u32,
    ready: bool,
    pid1: Option<i32>,
}

/// One running pod.
pub struct Pod {
    pub meta: PodMeta,
    pub ip: Ipv4Addr,
    netns: String,
    dir: PathBuf,
    spec: PodSpec,
    net: Arc<Network>,
    images: Images,
    secrets: BTreeMap<String, Secret>,
    containers: Mutex<BTreeMap<String, ContainerRun>>,
    stopping: AtomicBool,
    threads: Mutex<Vec<JoinHandle<()>>>,
    init_failed: Mutex<Option<String>>,
    created: Instant,
}

impl Pod {
    /// Create the pod's sandbox and volumes, run its init containers, then start its
    /// containers. Returns as soon as the containers are started (or an init container
    /// failed: see [`Pod::init_error`]).
    pub fn start(
        net: &Arc<Network>,
        meta: PodMeta,
        spec: &PodSpec,
        config_maps: &[ConfigMap],
        secrets: &[Secret],
        images: &Images,
    ) -> Result<Arc<Pod>, String> {
        let dir = net.dir().join(&meta.name);
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(dir.join("logs")).map_err(|e| e.to_string())?;
        let netns = format!("fo{}-p{}", net.id, pod_seq());
        let _ = run(Command::new("ip").args(["netns", "del", &netns]));
        run(Command::new("ip").args(["netns", "add", &netns]))?;
        let ip = net.attach(&netns)?;
        let fqdn = format!(
            "{}.{}.{}.svc.{}",
            meta.hostname, meta.subdomain, meta.namespace, meta.cluster_domain
        );
        let short = format!("{}.{}", meta.hostname, meta.subdomain);
        net.publish(&[fqdn, short, meta.hostname.clone()], Some(ip));

        let pod = Arc::new(Pod {
            meta,
            ip,
            netns,
            dir,
            spec: spec.clone(),
            net: net.clone(),
            images: images.clone(),
            secrets: secrets
                .iter()
                .map(|s| (s.metadata.name.clone().unwrap_or_default(), s.clone()))
                .collect(),
            containers: Mutex::new(BTreeMap::new()),
            stopping: AtomicBool::new(false),
            threads: Mutex::new(Vec::new()),
            init_failed: Mutex::new(None),
            created: Instant::now(),
        });
        pod.make_volumes(config_maps, secrets)?;

        for c in spec.init_containers.iter().flatten() {
            let mut child = pod.spawn(c)?;
            let status = child.wait().map_err(|e| e.to_string())?;
            if !status.success() {
                let msg = format!(
                    "init container {} exited with {status}: {}",
                    c.name,
                    pod.logs(&c.name)
                );
                *pod.init_failed.lock().unwrap() = Some(msg);
                return Ok(pod);
            }
        }
        for c in &spec.containers {
            pod.containers.lock().unwrap().insert(
                c.name.clone(),
                ContainerRun {
                    state: State::Waiting,
                    restarts: 0,
                    ready: false,
                    pid1: None,
                },
            );
        }
        for c in spec.containers.clone() {
            let p = pod.clone();
            let handle = std::thread::spawn(move || p.supervise(&c));
            pod.threads.lock().unwrap().push(handle);
        }
        Ok(pod)
    }

    /// The failure of an init container, if one failed.
    pub fn init_error(&self) -> Option<String> {
        self.init_failed.lock().unwrap().clone()
    }

    fn fs_group(&self) -> Option<i64> {
        self.spec.security_context.as_ref().and_then(|s| s.fs_group)
    }

    fn make_volumes(&self, config_maps: &[ConfigMap], secrets: &[Secret]) -> Result<(), String> {
        let vols = self.dir.join("volumes");
        fs::create_dir_all(&vols).map_err(|e| e.to_string())?;
        for v in self.spec.volumes.iter().flatten() {
            let path = vols.join(&v.name);
            self.make_volume(v, &path, config_maps, secrets)
                .map_err(|e| format!("volume {}: {e}", v.name))?;
        }
        Ok(())
    }

    fn make_volume(
        &self,
        v: &Volume,
        path: &Path,
        config_maps: &[ConfigMap],
        secrets: &[Secret],
    ) -> Result<(), String> {
        let fs_group = self.fs_group();
        if let Some(ed) = &v.empty_dir {
            fs::create_dir_all(path).map_err(|e| e.to_string())?;
            if ed.medium.as_deref() == Some("Memory") {
                run(Command::new("mount")
                    .args(["-t", "tmpfs", "-o", "mode=0777", "tmpfs"])
                    .arg(path))?;
            }
            let mut mode = 0o777;
            if let Some(g) = fs_group {
                std::os::unix::fs::chown(path, Some(0), Some(g as u32))
                    .map_err(|e| e.to_string())?;
                mode |= 0o2000;
            }
            fs::set_permissions(path, fs::Permissions::from_mode(mode))
                .map_err(|e| e.to_string())?;
            return Ok(());
        }
        if let Some(image) = &v.image {
            // The image's root, of which only its `/opt` is emulated (mounts name a subPath
            // under it); mounted in place, nothing copied, as the runtime does.
            let reference = image.reference.as_deref().unwrap_or_default();
            let opt = self
                .images
                .opt_for(reference)
                .ok_or_else(|| format!("no tree for image {reference}"))?;
            fs::create_dir_all(path).map_err(|e| e.to_string())?;
            return symlink(opt, path.join("opt")).map_err(|e| e.to_string());
        }
        let (files, default_mode, items): (BTreeMap<String, Vec<u8>>, i32, _) =
            if let Some(cm) = &v.config_map {
                let obj = config_maps
                    .iter()
                    .find(|c| c.metadata.name.as_deref() == Some(cm.name.as_str()))
                    .ok_or_else(|| format!("ConfigMap {} not found", cm.name))?;
                (
                    obj.data
                        .clone()
                        .unwrap_or_default()
                        .into_iter()
                        .map(|(k, v)| (k, v.into_bytes()))
                        .collect(),
                    cm.default_mode.unwrap_or(0o644),
                    cm.items.clone(),
                )
            } else if let Some(sv) = &v.secret {
                let name = sv.secret_name.clone().unwrap_or_default();
                let obj = secrets
                    .iter()
                    .find(|s| s.metadata.name.as_deref() == Some(name.as_str()))
                    .ok_or_else(|| format!("Secret {name} not found"))?;
                let mut data: BTreeMap<String, Vec<u8>> = obj
                    .data
                    .clone()
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(k, v)| (k, v.0))
                    .collect();
                for (k, v) in obj.string_data.clone().unwrap_or_default() {
                    data.insert(k, v.into_bytes());
                }
                (data, sv.default_mode.unwrap_or(0o644), sv.items.clone())
            } else if let Some(hp) = &v.host_path {
                fs::create_dir_all(&hp.path).map_err(|e| e.to_string())?;
                symlink(&hp.path, path).map_err(|e| e.to_string())?;
                return Ok(());
            } else {
                return Err(NOT_EMULATED.into());
            };
        // The atomic writer: ..<ts>/ with the files, ..data -> ..<ts>, key -> ..data/key.
        fs::create_dir_all(path).map_err(|e| e.to_string())?;
        let ts = path.join("..2026_01_01_00_00_00.000000001");
        fs::create_dir_all(&ts).map_err(|e| e.to_string())?;
        let chosen: Vec<(String, String, i32)> = match items {
            Some(items) => items
                .iter()
                .map(|i| {
                    (
                        i.key.clone(),
                        i.path.clone(),
                        i.mode.unwrap_or(default_mode),
                    )
                })
                .collect(),
            None => files
                .keys()
                .map(|k| (k.clone(), k.clone(), default_mode))
                .collect(),
        };
        let mut top = Vec::new();
        for (key, rel, mode) in chosen {
            let body = files.get(&key).ok_or_else(|| format!("no key {key}"))?;
            let file = ts.join(&rel);
            if let Some(parent) = file.parent() {
                fs::create_dir_all(parent).map_err(|e| e.to_string())?;
            }
            fs::write(&file, body).map_err(|e| e.to_string())?;
            // The kubelet adds group read (and keeps the mode's other bits) with fsGroup.
            let mode = if fs_group.is_some() {
                mode | 0o040
            } else {
                mode
            };
            fs::set_permissions(&file, fs::Permissions::from_mode(mode as u32))
                .map_err(|e| e.to_string())?;
            if let Some(g) = fs_group {
                std::os::unix::fs::chown(&file, Some(0), Some(g as u32))
                    .map_err(|e| e.to_string())?;
            }
            let first = rel.split('/').next().unwrap_or(&rel).to_string();
            if !top.contains(&first) {
                top.push(first);
            }
        }
        fs::set_permissions(&ts, fs::Permissions::from_mode(0o755)).map_err(|e| e.to_string())?;
        if let Some(g) = fs_group {
            std::os::unix::fs::chown(path, Some(0), Some(g as u32)).map_err(|e| e.to_string())?;
            std::os::unix::fs::chown(&ts, Some(0), Some(g as u32)).map_err(|e| e.to_string())?;
        }
        symlink(ts.file_name().unwrap(), path.join("..data")).map_err(|e| e.to_string())?;
        for name in top {
            symlink(format!("..data/{name}"), path.join(&name)).map_err(|e| e.to_string())?;
        }
        Ok(())
    }

    /// The container's user: (uid, gid, groups, no_new_privs, read-only root).
    fn identity(&self, c: &Container) -> (u32, u32, Vec<u32>, bool, bool) {
        let pod: PodSecurityContext = self.spec.security_context.clone().unwrap_or_default();
        let ctr = c.security_context.clone().unwrap_or_default();
        let uid = ctr.run_as_user.or(pod.run_as_user).unwrap_or(0) as u32;
        let gid = ctr.run_as_group.or(pod.run_as_group).unwrap_or(0) as u32;
        let mut groups: Vec<u32> = pod
            .supplemental_groups
            .clone()
            .unwrap_or_default()
            .into_iter()
            .map(|g| g as u32)
            .collect();
        if let Some(g) = pod.fs_group {
            groups.push(g as u32);
        }
        groups.sort();
        groups.dedup();
        let nnp = ctr.allow_privilege_escalation == Some(false);
        let ro = ctr.read_only_root_filesystem == Some(true);
        (uid, gid, groups, nnp, ro)
    }

    /// The container's environment as the kubelet builds it: PATH and HOSTNAME from the
    /// runtime and image, then `env` in order with `$(VAR)` references expanded.
    pub fn environment(&self, c: &Container) -> Vec<(String, String)> {
        let (uid, ..) = self.identity(c);
        let mut env: Vec<(String, String)> = vec![
            (
                "PATH".into(),
                "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into(),
            ),
            ("HOSTNAME".into(), self.meta.hostname.clone()),
            (
                "HOME".into(),
                if uid == 0 { "/root".into() } else { "/".into() },
            ),
        ];
        for EnvVar {
            name,
            value,
            value_from,
        } in c.env.iter().flatten()
        {
            let v = if let Some(v) = value {
                expand(v, &env)
            } else if let Some(from) = value_from {
                if let Some(sk) = &from.secret_key_ref {
                    self.secrets
                        .get(&sk.name)
                        .and_then(|s| s.data.as_ref())
                        .and_then(|d| d.get(&sk.key))
                        .map(|b| String::from_utf8_lossy(&b.0).into_owned())
                        .unwrap_or_default()
                } else if let Some(r) = &from.resource_field_ref {
                    resource_field(c, &r.resource)
                } else if let Some(f) = &from.field_ref {
                    match f.field_path.as_str() {
                        "metadata.name" => self.meta.name.clone(),
                        "metadata.namespace" => self.meta.namespace.clone(),
                        "status.podIP" => self.ip.to_string(),
                        _ => String::new(),
                    }
                } else {
                    String::new()
                }
            } else {
                String::new()
            };
            env.retain(|(n, _)| n != name);
            env.push((name.clone(), v));
        }
        env
    }

    /// The shell script that builds the container's root and execs `argv` in it.
    fn container_script(&self, c: &Container, argv: &[String], exec_only: bool) -> String {
        let (uid, gid, groups, nnp, ro_root) = self.identity(c);
        let env = self.environment(c);
        let mut s = String::from("set -eu\n");
        let root = self.dir.join("roots").join(&c.name);
        let r = quote(&root.to_string_lossy());
        if !exec_only {
            let _ = writeln!(s, "R={r}\nmkdir -p \"$R\"");
            s.push_str(
                "mount -t tmpfs -o mode=0755 rootfs \"$R\"\n\
                 mkdir \"$R/usr\"; mount --rbind /usr \"$R/usr\"; mount -o remount,bind,ro \"$R/usr\"\n\
                 for l in bin sbin lib lib32 lib64 libx32; do\n\
                 \x20 if [ -L \"/$l\" ]; then ln -s \"$(readlink \"/$l\")\" \"$R/$l\";\n\
                 \x20 elif [ -d \"/$l\" ]; then mkdir \"$R/$l\"; mount --rbind \"/$l\" \"$R/$l\"; fi\n\
                 done\n\
                 cp -a /etc \"$R/etc\"\n\
                 mkdir -p \"$R/tmp\" \"$R/var/tmp\" \"$R/run\" \"$R/root\" \"$R/home\" \"$R/dev\" \"$R/proc\" \"$R/sys\" \"$R/opt\" \"$R/mnt\"\n\
                 chmod 1777 \"$R/tmp\" \"$R/var/tmp\"; chmod 0700 \"$R/root\"\n\
                 mount --rbind /dev \"$R/dev\"\n\
                 mount -t tmpfs -o mode=1777 shm \"$R/dev/shm\"\n\
                 mount -t proc proc \"$R/proc\"\n\
                 mount --rbind /sys \"$R/sys\"\n",
            );
            // The termination message file, as the kubelet mounts it (the container's
            // terminationMessagePath, by default /dev/termination-log): a file of this pod's.
            let message_path = c
                .termination_message_path
                .clone()
                .unwrap_or_else(|| "/dev/termination-log".to_string());
            let message_file = self.termination_message_file(&c.name);
            let _ = writeln!(
                s,
                "t=\"$R\"{}; if [ ! -e \"$t\" ]; then mkdir -p \"$(dirname \"$t\")\"; touch \"$t\"; fi\n\
                 mount --bind {} \"$t\"",
                quote(&message_path),
                quote(&message_file.to_string_lossy()),
            );
            let _ = writeln!(
                s,
                "touch \"$R/etc/hosts\"; mount --bind {} \"$R/etc/hosts\"\n\
                 echo {h} > \"$R/etc/hostname\"; : > \"$R/etc/resolv.conf\"; hostname {h}",
                quote(&self.net.hosts_file().to_string_lossy()),
                h = quote(&self.meta.hostname),
            );
            if let Some(opt) = self.images.opt_for(c.image.as_deref().unwrap_or_default()) {
                let _ = writeln!(
                    s,
                    "mount --bind {} \"$R/opt\"; mount -o remount,bind,ro \"$R/opt\"",
                    quote(&opt.to_string_lossy())
                );
            }
            for m in c.volume_mounts.iter().flatten() {
                let mut src = self.dir.join("volumes").join(&m.name);
                if let Some(sub) = m.sub_path.as_deref().filter(|s| !s.is_empty()) {
                    src = src.join(sub);
                    if !src.exists() {
                        // The kubelet creates a missing subPath directory.
                        let _ = fs::create_dir_all(&src);
                    }
                }
                let target = format!("\"$R\"{}", quote(&m.mount_path));
                let q = quote(&src.to_string_lossy());
                let _ = writeln!(
                    s,
                    "if [ -d {q} ]; then mkdir -p {target}; else mkdir -p \"$(dirname {target})\"; touch {target}; fi\n\
                     mount --bind {q} {target}"
                );
                if m.read_only == Some(true) {
                    let _ = writeln!(s, "mount -o remount,bind,ro {target}");
                }
            }
            if ro_root {
                s.push_str("mount -o remount,bind,ro \"$R\"\n");
            }
        }
        let mut cmd = String::new();
        if !exec_only {
            let _ = write!(cmd, "exec chroot \"$R\" ");
        }
        let _ = write!(cmd, "setpriv --reuid={uid} --regid={gid} ");
        if groups.is_empty() {
            cmd.push_str("--clear-groups ");
        } else {
            let g: Vec<String> = groups.iter().map(u32::to_string).collect();
            let _ = write!(cmd, "--groups={} ", g.join(","));
        }
        if nnp {
            cmd.push_str("--no-new-privs ");
        }
        cmd.push_str("env -i ");
        if let Some(wd) = c.working_dir.as_deref().filter(|w| !w.is_empty()) {
            let _ = write!(cmd, "-C {} ", quote(wd));
        }
        cmd.push_str("-- ");
        for (k, v) in &env {
            let _ = write!(cmd, "{} ", quote(&format!("{k}={v}")));
        }
        for a in argv {
            let _ = write!(cmd, "{} ", quote(&expand(a, &env)));
        }
        s.push_str(&cmd);
        s.push('\n');
        s
    }

    fn argv(c: &Container) -> Vec<String> {
        let mut argv: Vec<String> = c.command.clone().unwrap_or_default();
        argv.extend(c.args.clone().unwrap_or_default());
        if argv.is_empty() {
            // No image entrypoint to fall back on here.
            argv = vec!["/bin/sh".into(), "-c".into(), "sleep infinity".into()];
        }
        argv
    }

    fn spawn(&self, c: &Container) -> Result<Child, String> {
        // A fresh, world-writable termination message file per run, as the kubelet makes;
        // the mount target under /dev exists on the host (the container's /dev is the
        // host's, bound), so the bind has somewhere to go.
        let message_file = self.termination_message_file(&c.name);
        fs::create_dir_all(message_file.parent().unwrap()).map_err(|e| e.to_string())?;
        // The last run's message stays readable, as `lastState.terminated.message`.
        if message_file.exists() {
            fs::rename(&message_file, message_file.with_extension("last"))
                .map_err(|e| e.to_string())?;
        }
        fs::write(&message_file, "").map_err(|e| e.to_string())?;
        fs::set_permissions(&message_file, fs::Permissions::from_mode(0o666))
            .map_err(|e| e.to_string())?;
        let target = c
            .termination_message_path
            .as_deref()
            .unwrap_or("/dev/termination-log");
        if target.starts_with("/dev/") && !Path::new(target).exists() {
            fs::write(target, "").map_err(|e| format!("{target}: {e}"))?;
        }
        let script = self.container_script(c, &Self::argv(c), false);
        let path = self.dir.join(format!("run-{}.sh", c.name));
        fs::write(&path, &script).map_err(|e| e.to_string())?;
        let log = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path(&c.name))
            .map_err(|e| e.to_string())?;
        // The parent-death signal ends the container with the thread that supervises it,
        // also when the test process is killed: no broker outlives its test.
        Command::new("setpriv")
            .args(["--pdeathsig", "KILL", "ip", "netns", "exec", &self.netns])
            .args([
                "unshare",
                "--mount",
                "--uts",
                "--ipc",
                "--pid",
                "--fork",
                "--kill-child",
                "--propagation",
                "private",
                "/bin/sh",
            ])
            .arg(&path)
            .stdin(Stdio::null())
            .stdout(log.try_clone().map_err(|e| e.to_string())?)
            .stderr(log)
            .spawn()
            .map_err(|e| format!("starting container {}: {e}", c.name))
    }

    /// The host file behind a container's termination message (see `container_script`).
    fn termination_message_file(&self, container: &str) -> PathBuf {
        self.dir.join("termination").join(container)
    }

    /// What the container wrote to its termination message (its last run), as the kubelet
    /// reports it in `state.terminated.message`.
    pub fn termination_message(&self, container: &str) -> String {
        fs::read_to_string(self.termination_message_file(container)).unwrap_or_default()
    }

    /// What the container's run before the last wrote to its termination message, as the
    /// kubelet reports it in `lastState.terminated.message` after a restart.
    pub fn last_termination_message(&self, container: &str) -> String {
        let file = self
            .termination_message_file(container)
            .with_extension("last");
        fs::read_to_string(file).unwrap_or_default()
    }

    fn log_path(&self, container: &str) -> PathBuf {
        self.dir.join("logs").join(format!("{container}.log"))
    }

    /// Everything the container wrote so far (all its runs), as `kubectl logs` would show.
    pub fn logs(&self, container: &str) -> String {
        fs::read_to_string(self.log_path(container)).unwrap_or_default()
    }

    /// The host PID of the container's PID 1, once it runs.
    fn pid1_of(unshare_pid: u32) -> Option<i32> {
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            let path = format!("/proc/{unshare_pid}/task/{unshare_pid}/children");
            if let Ok(s) = fs::read_to_string(&path)
                && let Some(p) = s.split_whitespace().next()
            {
                return p.parse().ok();
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        None
    }

    fn supervise(self: Arc<Self>, c: &Container) {
        let on_failure = self.spec.restart_policy.as_deref() != Some("Never");
        loop {
            if self.stopping.load(Ordering::SeqCst) {
                return;
            }
            let mut child = match self.spawn(c) {
                Ok(child) => child,
                Err(e) => {
                    let _ = fs::write(self.log_path(&c.name), e);
                    self.set_state(&c.name, State::Terminated(128));
                    return;
                }
            };
            let pid1 = Self::pid1_of(child.id());
            {
                let mut cs = self.containers.lock().unwrap();
                let run = cs.get_mut(&c.name).unwrap();
                run.state = State::Running;
                run.pid1 = pid1;
                run.ready = false;
            }
            let probe = c.readiness_probe.clone();
            let prober = probe.map(|p| {
                let pod = self.clone();
                let c = c.clone();
                std::thread::spawn(move || pod.probe_loop(&c, &p))
            });
            let code = match child.wait() {
                Ok(st) => st.code().unwrap_or(137),
                Err(_) => 137,
            };
            self.set_state(&c.name, State::Terminated(code));
            if let Some(t) = prober {
                let _ = t.join();
            }
            if code == 0 || !on_failure || self.stopping.load(Ordering::SeqCst) {
                return;
            }
            self.containers
                .lock()
                .unwrap()
                .get_mut(&c.name)
                .unwrap()
                .restarts += 1;
            std::thread::sleep(Duration::from_secs(1));
        }
    }

    fn set_state(&self, name: &str, state: State) {
        let mut cs = self.containers.lock().unwrap();
        let run = cs.get_mut(name).unwrap();
        if matches!(state, State::Terminated(_)) {
            run.ready = false;
            run.pid1 = None;
        }
        run.state = state;
    }

    fn probe_loop(&self, c: &Container, p: &Probe) {
        let period = Duration::from_secs(p.period_seconds.unwrap_or(10).max(1) as u64);
        let initial = Duration::from_secs(p.initial_delay_seconds.unwrap_or(0).max(0) as u64);
        let success_threshold = p.success_threshold.unwrap_or(1).max(1);
        let failure_threshold = p.failure_threshold.unwrap_or(3).max(1);
        std::thread::sleep(initial);
        let (mut ok_run, mut fail_run) = (0, 0);
        loop {
            let running = matches!(self.state(&c.name), Some(State::Running));
            if !running || self.stopping.load(Ordering::SeqCst) {
                return;
            }
            let ok = self.probe_once(c, p);
            if ok {
                ok_run += 1;
                fail_run = 0;
            } else {
                fail_run += 1;
                ok_run = 0;
            }
            let mut cs = self.containers.lock().unwrap();
            let run = cs.get_mut(&c.name).unwrap();
            if ok_run >= success_threshold {
                run.ready = true;
            } else if fail_run >= failure_threshold {
                run.ready = false;
            }
            drop(cs);
            std::thread::sleep(period);
        }
    }

    /// One run of a readiness probe, as the kubelet runs it.
    pub fn probe_once(&self, c: &Container, p: &Probe) -> bool {
        let timeout = Duration::from_secs(p.timeout_seconds.unwrap_or(1).max(1) as u64);
        if let Some(exec) = &p.exec {
            let argv = exec.command.clone().unwrap_or_default();
            return self
                .exec_timeout(&c.name, &argv, timeout)
                .map(|(code, _)| code == 0)
                .unwrap_or(false);
        }
        if let Some(tcp) = &p.tcp_socket {
            let port = match &tcp.port {
                IntOrString::Int(p) => *p,
                IntOrString::String(name) => c
                    .ports
                    .iter()
                    .flatten()
                    .find(|cp| cp.name.as_deref() == Some(name))
                    .map(|cp| cp.container_port)
                    .unwrap_or(0),
            };
            let host = tcp.host.clone().unwrap_or_else(|| self.ip.to_string());
            return run(Command::new("ip")
                .args(["netns", "exec", &self.netns])
                .args([
                    "timeout",
                    &timeout.as_secs().to_string(),
                    "bash",
                    "-c",
                    &format!("exec 3<>/dev/tcp/{host}/{port}"),
                ]))
            .is_ok();
        }
        false
    }

    /// Run `argv` in a running container (as `kubectl exec` does): its namespaces, root,
    /// user and environment. Returns the exit code and the combined output.
    pub fn exec(&self, container: &str, argv: &[&str]) -> Result<(i32, String), String> {
        let argv: Vec<String> = argv.iter().map(|s| s.to_string()).collect();
        self.exec_timeout(container, &argv, Duration::from_secs(120))
    }

    fn exec_timeout(
        &self,
        container: &str,
        argv: &[String],
        timeout: Duration,
    ) -> Result<(i32, String), String> {
        let c = self
            .spec
            .containers
            .iter()
            .find(|c| c.name == container)
            .ok_or_else(|| format!("no container {container}"))?;
        // A container that is still starting gets until the timeout to run: its PID 1 is
        // there from the start, but it is the container only once in its root (before, it
        // is the script that sets its mounts up, in the host's).
        let deadline = Instant::now() + timeout;
        let in_its_root = |pid: i32| {
            fs::read_link(format!("/proc/{pid}/root")).is_ok_and(|r| r != Path::new("/"))
        };
        let pid = loop {
            let pid = self.pid1(container).filter(|&pid| in_its_root(pid));
            match pid {
                Some(pid) => break pid,
                None if Instant::now() < deadline
                    && self.state(container) != Some(State::Terminated(0)) =>
                {
                    std::thread::sleep(Duration::from_millis(50))
                }
                None => return Err(format!("container {container} is not running")),
            }
        };
        let script = self.container_script(c, argv, true);
        let mut child = Command::new("nsenter")
            .args([
                "-t",
                &pid.to_string(),
                "-m",
                "-u",
                "-i",
                "-n",
                "-p",
                "-r",
                "-w",
            ])
            .args(["/bin/sh", "-c", &script])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| e.to_string())?;
        loop {
            if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
                let mut out = String::new();
                child.stdout.take().unwrap().read_to_string(&mut out).ok();
                let mut err = String::new();
                child.stderr.take().unwrap().read_to_string(&mut err).ok();
                out.push_str(&err);
                return Ok((status.code().unwrap_or(137), out));
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "exec {argv:?} in {container}: timed out after {timeout:?}"
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The container's state.
    pub fn state(&self, container: &str) -> Option<State> {
        self.containers
            .lock()
            .unwrap()
            .get(container)
            .map(|r| r.state.clone())
    }

    /// How often the kubelet restarted the container.
    pub fn restarts(&self, container: &str) -> u32 {
        self.containers
            .lock()
            .unwrap()
            .get(container)
            .map(|r| r.restarts)
            .unwrap_or(0)
    }

    /// Whether the container's readiness probe (if any) last passed; no probe means ready
    /// once running.
    pub fn ready(&self, container: &str) -> bool {
        let has_probe = self
            .spec
            .containers
            .iter()
            .any(|c| c.name == container && c.readiness_probe.is_some());
        let cs = self.containers.lock().unwrap();
        match cs.get(container) {
            Some(r) if has_probe => r.ready,
            Some(r) => r.state == State::Running,
            None => false,
        }
    }

    /// Wait until `container`'s log satisfies `check`, at most `timeout`: whether it did.
    pub fn wait_log(
        &self,
        container: &str,
        timeout: Duration,
        check: impl Fn(&str) -> bool,
    ) -> bool {
        let deadline = Instant::now() + timeout;
        while !check(&self.logs(container)) {
            if Instant::now() > deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        true
    }

    /// Wait until `container` has terminated; its exit code.
    pub fn wait_exit(&self, container: &str, timeout: Duration) -> Result<i32, String> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(State::Terminated(code)) = self.state(container) {
                // With OnFailure a non-zero exit is restarted; the test sees the exit.
                return Ok(code);
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "{}/{container} still running after {timeout:?}; log:\n{}",
                    self.meta.name,
                    tail(&self.logs(container), 60)
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Wait until `container` is ready (its probe passes).
    pub fn wait_ready(&self, container: &str, timeout: Duration) -> Result<Duration, String> {
        let deadline = Instant::now() + timeout;
        loop {
            if self.ready(container) {
                return Ok(self.created.elapsed());
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "{}/{container} not ready after {timeout:?}; log:\n{}",
                    self.meta.name,
                    tail(&self.logs(container), 60)
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The pod's `terminationGracePeriodSeconds` (Kubernetes' default: 30 s).
    pub fn termination_grace(&self) -> Duration {
        Duration::from_secs(
            self.spec
                .termination_grace_period_seconds
                .unwrap_or(30)
                .max(0) as u64,
        )
    }

    /// Delete the pod as the kubelet does: SIGTERM to every container's PID 1, SIGKILL after
    /// the grace period, then the sandbox goes (volumes, address, DNS name).
    pub fn delete(&self, grace: Duration) {
        self.begin_deletion();
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline
            && self
                .containers
                .lock()
                .unwrap()
                .values()
                .any(|r| r.state == State::Running)
        {
            std::thread::sleep(Duration::from_millis(50));
        }
        self.kill_and_tear_down();
    }

    /// The start of a deletion, as the kubelet's: no container is restarted any more, and
    /// every container's PID 1 gets SIGTERM.
    fn begin_deletion(&self) {
        self.stopping.store(true, Ordering::SeqCst);
        for r in self.containers.lock().unwrap().values() {
            if let Some(p) = r.pid1 {
                unsafe_kill(p, "TERM");
            }
        }
    }

    /// The host PID of `container`'s PID 1 while it runs.
    fn pid1(&self, container: &str) -> Option<i32> {
        self.containers
            .lock()
            .unwrap()
            .get(container)
            .and_then(|r| r.pid1)
    }

    /// The end of a deletion once the grace period is over: SIGKILL to every container's PID
    /// 1 (and so to all in its PID namespace), then the sandbox goes.
    fn kill_and_tear_down(&self) {
        for r in self.containers.lock().unwrap().values() {
            if let Some(p) = r.pid1 {
                unsafe_kill(p, "KILL");
            }
        }
        for t in self.threads.lock().unwrap().drain(..) {
            let _ = t.join();
        }
        self.teardown();
    }

    /// Send `signal` to the process of `container` whose command line begins with `command`
    /// (program file name, first arguments), as `kill` typed in the container would. Err if
    /// there is none.
    pub fn kill_in(&self, container: &str, command: &[&str], signal: &str) -> Result<(), String> {
        let root = self.pid1(container);
        let pid = root
            .and_then(|root| descendant_running(root, begins_with(command)))
            .ok_or_else(|| format!("no {command:?} runs in {container}"))?;
        unsafe_kill(pid, signal);
        Ok(())
    }

    /// Delete the pod as the kubelet does when its grace period ends in the middle of a given
    /// moment: SIGTERM to every container's PID 1; then, once a process whose command line
    /// begins with `command` (the program's file name, then its first arguments) runs in
    /// `container` and `now` says this is the moment, that process is stopped where it is
    /// (SIGSTOP, so the moment cannot pass) and every container gets SIGKILL. Err if the
    /// moment does not come within `timeout` (the pod is then deleted all the same).
    pub fn delete_killing_during(
        &self,
        container: &str,
        command: &[&str],
        now: impl Fn() -> bool,
        timeout: Duration,
    ) -> Result<(), String> {
        self.begin_deletion();
        let root = self.pid1(container);
        let deadline = Instant::now() + timeout;
        let mut caught = false;
        while let Some(root) = root
            && Instant::now() < deadline
        {
            if let Some(pid) = descendant_running(root, begins_with(command)) {
                unsafe_kill(pid, "STOP");
                if now() {
                    caught = true;
                    break;
                }
                unsafe_kill(pid, "CONT");
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        self.kill_and_tear_down();
        caught.then_some(()).ok_or_else(|| {
            format!("no {command:?} in {container} at the moment asked for within {timeout:?}")
        })
    }

    /// Stop (SIGSTOP) the process of `container` whose command line holds `words` in a row
    /// (the first matched by its file name: `["flux-modprobe.py", "rc3"]` is the rc3 that
    /// `flux modprobe` runs in Python) as soon as one runs, so that a moment it is in cannot
    /// pass: its PID, to [`Pod::resume`]. Err if none runs within `timeout`.
    pub fn stop_in(
        &self,
        container: &str,
        words: &[&str],
        timeout: Duration,
    ) -> Result<i32, String> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Some(pid) = self
                .pid1(container)
                .and_then(|root| descendant_running(root, holding(words)))
            {
                unsafe_kill(pid, "STOP");
                return Ok(pid);
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        Err(format!(
            "no {words:?} ran in {container} within {timeout:?}"
        ))
    }

    /// Let a process stopped by [`Pod::stop_in`] go on.
    pub fn resume(&self, pid: i32) {
        unsafe_kill(pid, "CONT");
    }

    fn teardown(&self) {
        let fqdn = format!(
            "{}.{}.{}.svc.{}",
            self.meta.hostname, self.meta.subdomain, self.meta.namespace, self.meta.cluster_domain
        );
        let short = format!("{}.{}", self.meta.hostname, self.meta.subdomain);
        self.net
            .publish(&[fqdn, short, self.meta.hostname.clone()], None);
        let _ = run(Command::new("ip").args(["netns", "del", &self.netns]));
        // Memory-backed emptyDirs are tmpfs mounts in the host's namespace.
        for v in self.spec.volumes.iter().flatten() {
            if v.empty_dir.as_ref().and_then(|e| e.medium.as_deref()) == Some("Memory") {
                let _ = run(Command::new("umount").arg(self.dir.join("volumes").join(&v.name)));
            }
        }
    }
}

/// A command line that begins with `command`: the program's file name, then its first
/// arguments (`flux dump` is a command built into `flux`).
fn begins_with<'a>(command: &'a [&'a str]) -> impl Fn(&[String]) -> bool + 'a {
    move |argv| holds_at(argv, 0, command)
}

/// A command line that holds `words` in a row, the first matched by its file name (a Python
/// command's script comes after the interpreter and its wrapper).
fn holding<'a>(words: &'a [&'a str]) -> impl Fn(&[String]) -> bool + 'a {
    move |argv| (0..argv.len()).any(|i| holds_at(argv, i, words))
}

fn holds_at(argv: &[String], i: usize, words: &[&str]) -> bool {
    let file = argv.get(i).map(|a| a.rsplit('/').next().unwrap_or(a));
    file == words.first().copied()
        && argv
            .get(i + 1..i + words.len())
            .is_some_and(|rest| rest == &words[1..])
}

/// A process among the descendants of `root` whose command line `matches`.
fn descendant_running(root: i32, matches: impl Fn(&[String]) -> bool) -> Option<i32> {
    let mut parents = BTreeMap::new();
    for entry in fs::read_dir("/proc").ok()?.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // pid (comm) state ppid ...: the name may hold spaces and parentheses.
        let after = stat
            .rsplit_once(')')
            .map(|(_, rest)| rest)
            .unwrap_or_default();
        if let Some(ppid) = after
            .split_whitespace()
            .nth(1)
            .and_then(|p| p.parse::<i32>().ok())
        {
            parents.insert(pid, ppid);
        }
    }
    let under_root = |mut pid: i32| {
        while let Some(&ppid) = parents.get(&pid) {
            if ppid == root {
                return true;
            }
            pid = ppid;
        }
        false
    };
    parents.keys().copied().find(|&pid| {
        let Ok(cmdline) = fs::read(format!("/proc/{pid}/cmdline")) else {
            return false;
        };
        let argv: Vec<String> = cmdline
            .split(|b| *b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        matches(&argv) && under_root(pid)
    })
}

fn unsafe_kill(pid: i32, sig: &str) {
    let _ = Command::new("kill")
        .args([&format!("-{sig}"), &pid.to_string()])
        .stderr(Stdio::null())
        .status();
}

static POD_SEQ: AtomicU32 = AtomicU32::new(0);
fn pod_seq() -> u32 {
    POD_SEQ.fetch_add(1, Ordering::SeqCst)
}

/// The last `n` lines of `s`.
pub fn tail(s: &str, n: usize) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Expand `$(NAME)` references to earlier variables, as the kubelet does (`$$` escapes).
pub fn expand(s: &str, env: &[(String, String)]) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(stripped) = after.strip_prefix('$') {
            out.push('$');
            rest = stripped;
        } else if after.starts_with('(')
            && let Some(close) = after.find(')')
        {
            let name = &after[1..close];
            match env.iter().rev().find(|(n, _)| n == name) {
                Some((_, v)) => out.push_str(v),
                None => {
                    out.push_str("$(");
                    out.push_str(name);
                    out.push(')');
                }
            }
            rest = &after[close + 1..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// A downward API `resourceFieldRef` as the kubelet resolves it with divisor 1: `limits.cpu`
/// is the container's CPU limit rounded up to whole CPUs, or the node's CPUs (this
/// machine's, the emulated node's allocatable) without a limit. Other fields are unset here.
fn resource_field(c: &Container, resource: &str) -> String {
    if resource != "limits.cpu" {
        return String::new();
    }
    let limit = c
        .resources
        .as_ref()
        .and_then(|r| r.limits.as_ref()?.get("cpu"));
    match limit {
        Some(q) => {
            let q = q.0.trim();
            let millis = match q.strip_suffix('m') {
                Some(m) => m.parse::<u64>().expect("a CPU limit in millicores"),
                None => (q.parse::<f64>().expect("a CPU limit in CPUs") * 1000.0) as u64,
            };
            millis.div_ceil(1000).to_string()
        }
        None => std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
            .to_string(),
    }
}
