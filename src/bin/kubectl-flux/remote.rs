//! Running in the lead pod: the `kubectl exec` argument vector around a fixed remote script
//! that hands every argument to Flux (or a shell) unchanged, and its exit code.

use std::ffi::OsString;
use std::process::{Command, ExitStatus, Stdio};

use anyhow::{Context, Result};

use crate::PLUGIN_ERROR;
use crate::args::KubeArgs;
use crate::target::Target;

/// The script `kubectl exec` runs in the lead pod's Flux container, with `$0` = `kubectl-flux`,
/// `$1` = the flux view's directory (empty without a view), `$2` = the lead broker's URI,
/// `$3` = `flux` or `shell`, then the arguments. POSIX sh; the arguments are only ever
/// expanded as `"$@"`, so none is split, globbed or expanded.
///
/// A view mounted as an image volume is read-only and has no `flux-view.sh`: the operator's
/// ConfigMap has it (since the image volume came; older pods have it in the view only).
const REMOTE_SCRIPT: &str = r#"if [ -n "$1" ]; then
  env_file="$1/flux-view.sh"
  [ -r "$env_file" ] || env_file=/etc/flux-operator/config/flux-view.sh
  if [ ! -r "$env_file" ]; then
    printf 'kubectl-flux: %s/flux-view.sh is missing in this container\n' "$1" >&2
    exit 127
  fi
  . "$env_file"
else
  FLUX_URI=$2
  fluxsocket=$2
  export FLUX_URI fluxsocket
fi
what=$3
shift 3
if [ "$what" = shell ]; then
  if command -v bash >/dev/null 2>&1; then exec bash "$@"; fi
  exec sh "$@"
fi
exec flux "$@""#;

/// The name the remote script runs under (`$0`: what its own messages say).
const REMOTE_NAME: &str = "kubectl-flux";

/// The `kubectl` to run: `$KUBECTL`, else `kubectl` on PATH.
pub(crate) fn kubectl() -> OsString {
    std::env::var_os("KUBECTL")
        .filter(|k| !k.is_empty())
        .unwrap_or_else(|| "kubectl".into())
}

/// `kubectl`'s arguments for `what` (`flux` or `shell`) with `args` in the target.
pub(crate) fn exec_args(
    kube: &KubeArgs,
    target: &Target,
    stdin: bool,
    tty: bool,
    what: &str,
    args: &[OsString],
) -> Vec<OsString> {
    let mut out: Vec<OsString> = Vec::new();
    if let Some(file) = &kube.kubeconfig {
        out.push("--kubeconfig".into());
        out.push(file.into());
    }
    if let Some(context) = &kube.context {
        out.push("--context".into());
        out.push(context.into());
    }
    out.extend(["-n".into(), (&target.namespace).into(), "exec".into()]);
    if stdin {
        out.push("-i".into());
    }
    if tty {
        out.push("-t".into());
    }
    out.extend([
        (&target.pod).into(),
        "-c".into(),
        (&target.container).into(),
        "--".into(),
        "/bin/sh".into(),
        "-c".into(),
        REMOTE_SCRIPT.into(),
        REMOTE_NAME.into(),
        target.view.clone().unwrap_or_default().into(),
        (&target.uri).into(),
        what.into(),
    ]);
    out.extend(args.iter().cloned());
    out
}

/// The exit code of a finished `kubectl` (128 + the signal that ended it, as shells report).
fn exit_code(status: ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => u8::try_from(code).unwrap_or(PLUGIN_ERROR),
        (None, Some(signal)) => u8::try_from(128 + signal).unwrap_or(PLUGIN_ERROR),
        (None, None) => PLUGIN_ERROR,
    }
}

/// `kubectl exec` with the terminal's standard streams; its exit code.
pub(crate) fn exec(
    kube: &KubeArgs,
    target: &Target,
    stdin: bool,
    tty: bool,
    what: &str,
    args: &[OsString],
) -> Result<u8> {
    // SIGINT (^C) goes to kubectl too, which ends the remote command; the plugin stays to
    // return kubectl's exit code. The handler is installed once this exists.
    let _interrupt = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
        .context("handling SIGINT")?;
    let mut cmd = Command::new(kubectl());
    cmd.args(exec_args(kube, target, stdin, tty, what, args));
    if !stdin {
        cmd.stdin(Stdio::null());
    }
    let status = cmd
        .status()
        .with_context(|| format!("running {:?} (set $KUBECTL to choose one)", kubectl()))?;
    Ok(exit_code(status))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::target::target_for_tests;
    use crate::test_support::{hostile, words};
    use flux_operator::flux::SOCKET_PATH;

    #[test]
    fn kubectl_exec_gets_each_argument_as_its_own_word_after_a_fixed_script() {
        let kube = KubeArgs {
            kubeconfig: Some("/my kube/config".into()),
            context: Some("ctx".into()),
            namespace: Some("ignored: the target's namespace is used".into()),
        };
        let args = exec_args(&kube, &target_for_tests(), true, false, "flux", &hostile());
        let mut want = words(&[
            "--kubeconfig",
            "/my kube/config",
            "--context",
            "ctx",
            "-n",
            "team",
            "exec",
            "-i",
            "demo-lead-0-0-abcde",
            "-c",
            "demo",
            "--",
            "/bin/sh",
            "-c",
            REMOTE_SCRIPT,
            "kubectl-flux",
            "/mnt/flux",
            "local:///run/flux-operator/broker/local",
            "flux",
        ]);
        want.extend(hostile());
        assert_eq!(args, want);
    }

    /// The remote script run here by /bin/sh against a fake view whose `flux` prints its
    /// arguments one per line and then `FLUX_URI`: every word arrives unchanged.
    #[test]
    fn the_remote_script_hands_flux_every_argument_unchanged() {
        let dir = tempfile::tempdir().unwrap();
        let view = dir.path().join("view with space");
        std::fs::create_dir_all(view.join("view/bin")).unwrap();
        let flux = view.join("view/bin/flux");
        std::fs::write(
            &flux,
            "#!/bin/sh\nfor a in \"$@\"; do printf '[%s]\\n' \"$a\"; done\nprintf 'uri=%s\\n' \"$FLUX_URI\"\n",
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&flux, std::fs::Permissions::from_mode(0o755)).unwrap();
        // As src/flux/scripts.rs writes it: PATH, then FLUX_URI and fluxsocket.
        std::fs::write(
            view.join("flux-view.sh"),
            format!(
                "PATH=\"${{PATH:+$PATH:}}\"'{}'\nexport PATH\nFLUX_URI=local://{SOCKET_PATH}\nfluxsocket=$FLUX_URI\nexport FLUX_URI fluxsocket\n",
                view.join("view/bin").display()
            ),
        )
        .unwrap();
        let run = |view: &str, uri: &str| {
            let out = Command::new("/bin/sh")
                .arg("-c")
                .arg(REMOTE_SCRIPT)
                .arg(REMOTE_NAME)
                .args([view, uri, "flux"])
                .args(hostile())
                .env("PATH", format!("{}:/usr/bin:/bin", view_bin(view, &flux)))
                .env_remove("FLUX_URI")
                .current_dir(dir.path())
                .output()
                .unwrap();
            assert!(out.status.success(), "{out:?}");
            String::from_utf8(out.stdout).unwrap()
        };
        fn view_bin(view: &str, flux: &std::path::Path) -> String {
            // Without a view, `flux` must already be on PATH (the image has Flux).
            if view.is_empty() {
                flux.parent().unwrap().display().to_string()
            } else {
                "/nonexistent".into()
            }
        }
        let want: String = hostile()
            .iter()
            .map(|a| format!("[{}]\n", a.to_string_lossy()))
            .collect();
        let out = run(&view.display().to_string(), "local:///unused");
        assert_eq!(out, format!("{want}uri=local://{SOCKET_PATH}\n"));
        // No view (spec.flux.container.disable): FLUX_URI from the plugin.
        let out = run("", "local:///the/socket");
        assert_eq!(out, format!("{want}uri=local:///the/socket\n"));
    }

    /// The ConfigMap's copy the remote script falls back to is where the operator mounts it.
    #[test]
    fn the_remote_script_falls_back_to_the_config_maps_flux_view_sh() {
        let file = format!(
            "{}/flux-view.sh",
            flux_operator::model::mounts::CONFIG_MOUNT
        );
        assert!(REMOTE_SCRIPT.contains(&format!("env_file={file}\n")));
    }

    #[test]
    fn the_remote_script_says_so_when_the_view_has_no_flux_view_sh() {
        let out = Command::new("/bin/sh")
            .args([
                "-c",
                REMOTE_SCRIPT,
                REMOTE_NAME,
                "/nonexistent",
                "x",
                "flux",
                "jobs",
            ])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(127));
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("/nonexistent/flux-view.sh is missing")
        );
    }

    #[test]
    fn the_remote_shell_reads_a_script_from_stdin_with_flux_uri_set() {
        use std::io::Write;
        let mut child = Command::new("/bin/sh")
            .args([
                "-c",
                REMOTE_SCRIPT,
                REMOTE_NAME,
                "",
                "local:///s",
                "shell",
                "-s",
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(b"echo \"uri=$FLUX_URI\"\nexit 4\n")
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), "uri=local:///s\n");
        assert_eq!(out.status.code(), Some(4));
    }

    #[test]
    fn the_exit_code_is_the_command_s_or_128_plus_its_signal() {
        let status = |script: &str| {
            Command::new("/bin/sh")
                .args(["-c", script])
                .status()
                .unwrap()
        };
        assert_eq!(exit_code(status("exit 3")), 3);
        assert_eq!(exit_code(status("exit 0")), 0);
        assert_eq!(exit_code(status("kill -9 $$")), 137);
    }

    #[test]
    fn only_a_shell_on_a_terminal_gets_a_tty() {
        let t = target_for_tests();
        let args = exec_args(
            &KubeArgs::default(),
            &t,
            true,
            true,
            "shell",
            &["-i".into()],
        );
        assert_eq!(args[..5], words(&["-n", "team", "exec", "-i", "-t"])[..]);
        let args = exec_args(&KubeArgs::default(), &t, false, false, "flux", &[]);
        assert_eq!(
            args[..4],
            words(&["-n", "team", "exec", "demo-lead-0-0-abcde"])[..]
        );
    }
}
