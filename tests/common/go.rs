//! The Go Flux Operator, for comparison: its source archive in `../shared/vendor` (the
//! conformance and real-node tests read its CRD and examples) and its manager as
//! `e2e/build-go-operator.sh` builds it (both benches run it).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, ensure};

/// The Go operator's source archive, relative to `CARGO_MANIFEST_DIR`.
pub const GO_OPERATOR_ARCHIVE: &str = "../shared/vendor/flux-operator-0d75cef8.tar.gz";

/// The Go operator's MiniCluster CRD, in its source tree.
pub const GO_CRD: &str = "config/crd/bases/flux-framework.org_miniclusters.yaml";

/// Unpack the members of the Go operator's archive that match the `tar --wildcards`
/// PATTERNS into `dir`; return the archive's top directory there.
pub fn unpack_go_operator(dir: &Path, patterns: &[&str]) -> Result<PathBuf> {
    let archive = Path::new(env!("CARGO_MANIFEST_DIR")).join(GO_OPERATOR_ARCHIVE);
    ensure!(
        archive.exists(),
        "the Go operator's source archive {} is missing (see ../shared/vendor/README.md)",
        archive.display()
    );
    let status = Command::new("tar")
        .arg("-xzf")
        .arg(&archive)
        .arg("-C")
        .arg(dir)
        .arg("--wildcards")
        .args(patterns)
        .status()
        .context("running tar")?;
    ensure!(status.success(), "tar failed on {}", archive.display());
    let top = std::fs::read_dir(dir)?
        .next()
        .context("empty archive")??
        .path();
    Ok(top)
}

/// The Go operator built by `e2e/build-go-operator.sh` (stamped: at once when it is built;
/// its progress on stderr): the directory with its manager, `bin/manager`, and its source
/// tree, `src/` (its CRD is `src/` + [`GO_CRD`]).
pub fn built_go_operator() -> Result<PathBuf> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("e2e/build-go-operator.sh");
    let out = Command::new(&script)
        .stderr(Stdio::inherit())
        .output()
        .context("running e2e/build-go-operator.sh")?;
    ensure!(
        out.status.success(),
        "e2e/build-go-operator.sh failed ({})",
        out.status
    );
    let dir = PathBuf::from(String::from_utf8(out.stdout)?.trim());
    ensure!(
        dir.join("bin/manager").exists(),
        "no manager in {}",
        dir.display()
    );
    Ok(dir)
}
