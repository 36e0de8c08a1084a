//! Where `spec.archive.path` lives: the Flux container's volume it is on (the one mounted
//! deepest above it), and the place that names the archive whichever cluster mounts it, so
//! two MiniClusters on one archive are seen for what they are (both would restore the same
//! jobs, and the last save would win).

use super::mounts::mount_path;
use crate::api::{ContainerVolume, MiniCluster, MiniClusterContainer};

/// The volume an archive path is on.
#[derive(Clone, Debug)]
pub struct ArchiveVolume<'a> {
    /// The volume's name (its key in the container's `volumes`).
    pub name: &'a str,
    /// The volume.
    pub volume: &'a ContainerVolume,
    /// The archive's path inside the volume, starting with '/', without empty or `.` parts.
    pub rest: String,
}

impl ArchiveVolume<'_> {
    /// Whether the volume outlives the pod: a claim, a host path or a CSI volume.
    pub fn outlives_the_pod(&self) -> bool {
        let v = self.volume;
        !(v.claim_name.is_empty() && v.host_path.is_empty() && v.csi_driver.is_empty())
    }
}

/// The volume of `container` the absolute `path` lies under, the one mounted deepest
/// (`None`: the container's own filesystem). Both paths are read without their empty and
/// `.` parts, as the kernel resolves them (`..` is refused by validation).
pub fn volume_of<'a>(container: &'a MiniClusterContainer, path: &str) -> Option<ArchiveVolume<'a>> {
    let path = clean(path);
    container
        .volumes
        .iter()
        .filter_map(|(name, volume)| {
            let mount = clean(&mount_path(volume));
            let rest = path.strip_prefix(&mount)?;
            (!mount.is_empty() && rest.starts_with('/'))
                .then(|| (mount.len(), name, volume, rest.to_string()))
        })
        .max_by_key(|(depth, ..)| *depth)
        .map(|(_, name, volume, rest)| ArchiveVolume { name, volume, rest })
}

/// The place `mc`'s archive is kept, the same text for every MiniCluster of the namespace
/// that would read and write the same file: the claim (or host directory, or CSI volume) and
/// the path inside it. `None` without an archive, or with one that is not on a volume that
/// outlives the pod (refused by [`super::validate`]).
pub fn place(mc: &MiniCluster) -> Option<String> {
    if !mc.has_archive() {
        return None;
    }
    let (_, container) = super::containers::flux_container(mc).ok()?;
    let on = volume_of(container, &mc.spec.archive.path)?;
    if !on.outlives_the_pod() {
        return None;
    }
    let rest = on.rest;
    let v = on.volume;
    Some(if !v.claim_name.is_empty() {
        format!("claim {}:{rest}", v.claim_name)
    } else if !v.host_path.is_empty() {
        format!(
            "host path {}{rest}",
            clean(&v.host_path).trim_end_matches('/')
        )
    } else {
        format!("CSI {} {:?}:{rest}", v.csi_driver, v.csi_driver_attributes)
    })
}

/// A path without empty and `.` parts: `/a//./b` is `/a/b`.
fn clean(path: &str) -> String {
    path.split('/')
        .filter(|part| !part.is_empty() && *part != ".")
        .fold(String::new(), |out, part| out + "/" + part)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_volume(path: &str, volume: ContainerVolume, at: &str) -> MiniCluster {
        let mut mc = crate::fixtures::with_command("m", 2, "app");
        mc.spec.archive.path = path.into();
        let volume = ContainerVolume {
            path: at.into(),
            ..volume
        };
        mc.spec.containers[0].volumes.insert("data".into(), volume);
        mc
    }

    fn claim(name: &str) -> ContainerVolume {
        ContainerVolume {
            claim_name: name.into(),
            ..ContainerVolume::default()
        }
    }

    fn host(path: &str) -> ContainerVolume {
        ContainerVolume {
            host_path: path.into(),
            ..ContainerVolume::default()
        }
    }

    #[test]
    fn an_archive_is_named_by_the_volume_it_is_on_and_its_path_inside_whoever_mounts_it() {
        // (what it proves, the MiniCluster, its archive's place)
        let cases = [
            (
                "a claim and the path inside it",
                with_volume("/state/a.tar.gz", claim("pvc"), "/state"),
                Some("claim pvc:/a.tar.gz"),
            ),
            (
                "the same claim mounted elsewhere is the same place",
                with_volume("/mnt/x/a.tar.gz", claim("pvc"), "/mnt/x/"),
                Some("claim pvc:/a.tar.gz"),
            ),
            (
                "another spelling of the same path (doubled slashes, '.') is the same place",
                with_volume("//state/./a.tar.gz", claim("pvc"), "/state"),
                Some("claim pvc:/a.tar.gz"),
            ),
            (
                "a host path: the node's directory and the path inside it",
                with_volume("/state/sub//./a.tar.gz", host("/data/"), "/state"),
                Some("host path /data/sub/a.tar.gz"),
            ),
            (
                "the same file through a deeper host path is the same place",
                with_volume("/state/a.tar.gz", host("/data/sub"), "/state"),
                Some("host path /data/sub/a.tar.gz"),
            ),
            (
                "an emptyDir is no place: refused by validation",
                with_volume(
                    "/state/a.tar.gz",
                    ContainerVolume {
                        empty_dir: true,
                        ..ContainerVolume::default()
                    },
                    "/state",
                ),
                None,
            ),
            (
                "the container's own filesystem is no place",
                with_volume("/elsewhere/a.tar.gz", claim("pvc"), "/state"),
                None,
            ),
            (
                "a mount path that is a prefix of a word is not above the file",
                with_volume("/statefile", claim("pvc"), "/state"),
                None,
            ),
            ("no archive", with_volume("", claim("pvc"), "/state"), None),
        ];
        for (what, mc, want) in cases {
            assert_eq!(place(&mc).as_deref(), want, "{what}");
        }
    }
}
