//! `kubectl flux`: a kubectl plugin that runs Flux's commands in a MiniCluster's instance.
//!
//! It finds the MiniCluster, checks that its instance can be reached (Running, a ready lead
//! broker pod, a broker socket), and runs `kubectl exec` in the lead pod's Flux container with
//! an argument vector, never a command line: a fixed POSIX `sh -c` script sources the flux
//! view's `flux-view.sh` (Flux on `PATH`, `FLUX_URI` at the lead broker's socket) and then
//! `exec flux "$@"`, so every argument reaches Flux exactly as it was typed. Output streams
//! through, standard input is passed where the command reads it, and the exit code is
//! Flux's. See docs/kubectl-flux.md.

mod args;
mod list;
mod remote;
mod target;
#[cfg(test)]
mod test_support;
mod wait;

use std::io::IsTerminal;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Parser;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

use args::{Cli, Cmd, FluxCommand, KubeArgs, split_flux_args};
use list::list;
use remote::exec;
use target::find;
use wait::wait;

/// The exit code of the plugin's own errors (MiniCluster not found, not running, ...);
/// clap's usage errors exit 2. Any other code is Flux's (or kubectl's, if the exec failed).
const PLUGIN_ERROR: u8 = 1;

/// The client and the namespace the kubeconfig (and the plugin's options) choose.
async fn connect(kube: &KubeArgs) -> Result<(Client, String)> {
    let options = KubeConfigOptions {
        context: kube.context.clone(),
        ..KubeConfigOptions::default()
    };
    let config = match &kube.kubeconfig {
        Some(file) => {
            let kubeconfig = Kubeconfig::read_from(file)
                .with_context(|| format!("reading the kubeconfig {}", file.display()))?;
            Config::from_custom_kubeconfig(kubeconfig, &options).await?
        }
        None if kube.context.is_some() => Config::from_kubeconfig(&options).await?,
        None => Config::infer()
            .await
            .context("no kubeconfig ($KUBECONFIG, ~/.kube/config) and not in a cluster")?,
    };
    let namespace = kube
        .namespace
        .clone()
        .unwrap_or_else(|| config.default_namespace.clone());
    Ok((Client::try_from(config)?, namespace))
}

async fn run_flux(kube: &KubeArgs, command: FluxCommand) -> Result<u8> {
    let (client, namespace) = connect(kube).await?;
    let target = find(&client, &namespace, &command.mc).await?;
    exec(
        kube,
        &target,
        command.reads_stdin(),
        false,
        "flux",
        &command.argv,
    )
}

async fn shell(kube: &KubeArgs, mc: &str) -> Result<u8> {
    let (client, namespace) = connect(kube).await?;
    let target = find(&client, &namespace, mc).await?;
    let tty = std::io::stdin().is_terminal() && std::io::stdout().is_terminal();
    // With a terminal, an interactive shell; without, a shell reading its script from stdin.
    let mode = if tty { "-i" } else { "-s" };
    exec(kube, &target, true, tty, "shell", &[mode.into()])
}

fn main() -> ExitCode {
    let cli = Cli::parse_from(split_flux_args(std::env::args_os().collect()));
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(PLUGIN_ERROR);
        }
    };
    let kube = cli.kube;
    let result = runtime.block_on(async {
        match cli.command {
            Cmd::Run(a) => run_flux(&kube, FluxCommand::new(&["run"], a)).await,
            Cmd::Submit(a) => run_flux(&kube, FluxCommand::new(&["submit"], a)).await,
            Cmd::Alloc(a) => run_flux(&kube, FluxCommand::new(&["alloc"], a)).await,
            Cmd::Batch(a) => run_flux(&kube, FluxCommand::new(&["batch"], a)).await,
            Cmd::Jobs(a) => run_flux(&kube, FluxCommand::new(&["jobs"], a)).await,
            Cmd::Attach(a) => run_flux(&kube, FluxCommand::new(&["job", "attach"], a)).await,
            Cmd::Cancel(a) => run_flux(&kube, FluxCommand::new(&["cancel"], a)).await,
            Cmd::Resource(a) => run_flux(&kube, FluxCommand::new(&["resource"], a)).await,
            Cmd::Queue(a) => run_flux(&kube, FluxCommand::new(&["queue"], a)).await,
            Cmd::Dmesg(a) => run_flux(&kube, FluxCommand::new(&["dmesg"], a)).await,
            Cmd::Shell(a) => shell(&kube, &a.mc).await,
            Cmd::Wait(a) => wait(&kube, a).await,
            Cmd::List(a) => list(&kube, a).await,
            Cmd::Other(words) => run_flux(&kube, FluxCommand::other(words)?).await,
        }
    });
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(PLUGIN_ERROR)
        }
    }
}
