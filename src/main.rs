//! `flux-operator`: runs the operator (`run`), or prints what it would create (`render`) and
//! its CRD (`crd`) and the policy that keeps a running MiniCluster's spec
//! (`immutable-policy`) without a cluster.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use flux_operator::{api, cli};

/// jemalloc, not glibc's malloc: the operator's heap is many small objects (the watch
/// caches') made and freed on several threads, and glibc keeps an arena per thread with
/// what was freed in it (docs/benchmarks.md: peak RSS at 1000 MiniClusters).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// The Flux Operator: Flux Framework MiniClusters on Kubernetes, run as JobSets.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the controller.
    Run(Box<flux_operator::controller::Config>),
    /// Print the MiniCluster CustomResourceDefinition (YAML).
    Crd,
    /// Print the ValidatingAdmissionPolicy and binding that keep a MiniCluster's spec
    /// fixed but for size and suspend (YAML; installed with the CRD).
    ImmutablePolicy,
    /// Print the objects a MiniCluster would create, offline.
    Render {
        /// MiniCluster manifest ("-" for standard input).
        #[arg(short = 'f', long = "filename")]
        file: PathBuf,
        /// The cluster DNS domain to write into broker addresses.
        #[arg(long, default_value = "cluster.local")]
        cluster_domain: String,
        /// Mount the flux view as an image volume where the spec does not say (the
        /// operator's `--flux-view-image-volume`).
        #[arg(long)]
        flux_view_image_volume: bool,
        /// Print only the broker config and scripts, as files, not the Kubernetes objects.
        #[arg(long)]
        files: bool,
    },
}

fn main() -> std::process::ExitCode {
    match run(Cli::parse()) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Crd => {
            print!("{}", api::crd_yaml()?);
            Ok(())
        }
        Command::ImmutablePolicy => {
            print!("{}", api::immutable::policy_yaml()?);
            Ok(())
        }
        Command::Render {
            file,
            cluster_domain,
            flux_view_image_volume,
            files,
        } => {
            let env = flux_operator::model::Environment {
                cluster_domain,
                view_image_volume: flux_view_image_volume,
            };
            cli::render(&file, &env, files)
        }
        Command::Run(config) => {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()?;
            runtime.block_on(flux_operator::controller::run(*config))
        }
    }
}
