//! Every generated script passes shellcheck (Debian's `shellcheck`, installed by the repo's
//! setup). User text (hooks, `commands.script`, `batchRaw`) is the user's and not checked.

use std::path::Path;
use std::process::Command;

use crate::model::containers::{Mode, companions, mode};

fn shellcheck(files: &[&Path]) -> (bool, String) {
    let out = Command::new("shellcheck")
        .arg("--severity=style")
        .arg("--norc")
        .args(files)
        .output()
        .expect("shellcheck is required for this test (Debian package `shellcheck`, see e2e/setup-host.sh)");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn generated_scripts_pass_shellcheck() {
    let dir = tempfile::tempdir().unwrap();
    let mut checked = 0;
    for (label, mc) in super::matrix().into_iter().chain(super::examples()) {
        let data = crate::flux::config_map_data(&crate::fixtures::cluster(&mc)).unwrap();
        let sub = dir.path().join(&label);
        std::fs::create_dir_all(&sub).unwrap();
        let companions: Vec<String> = companions(&mc)
            .into_iter()
            .filter_map(|s| {
                let c = s.spec(&mc)?;
                Some(crate::flux::scripts::files::companion(
                    s.file_prefix(),
                    &c.name,
                ))
            })
            .collect();
        let mut files = Vec::new();
        for (name, text) in &data {
            let generated = name == "lead.sh"
                || name == "follower.sh"
                || name == "view-init.sh"
                || companions.contains(name)
                || (name == "batch.sh" && mode(&mc).unwrap() == Mode::Batch);
            if generated {
                let path = sub.join(name);
                std::fs::write(&path, text).unwrap();
                files.push(path);
            }
        }
        assert!(files.len() >= 2, "{label}: {files:?}");
        let refs: Vec<&Path> = files.iter().map(|p| p.as_path()).collect();
        let (ok, report) = shellcheck(&refs);
        assert!(ok, "{label}: shellcheck found problems:\n{report}");
        checked += files.len();
    }
    assert!(checked > 20, "only {checked} scripts checked");
}

#[test]
fn the_stand_in_flux_passes_shellcheck() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/flux/tests/fake-flux.sh");
    let (ok, report) = shellcheck(&[&path]);
    assert!(ok, "{report}");
}

#[test]
fn shellcheck_catches_problems() {
    // The check above can fail: an unquoted expansion is reported.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.sh");
    std::fs::write(&path, "#!/bin/bash\nx=\"a b\"\nls $x\n").unwrap();
    assert!(!shellcheck(&[&path]).0);
}
