//! Structured logs through `tracing`: JSON by default (for log pipelines), text for humans.
//! The level comes from `RUST_LOG` (default `info`).

use tracing_subscriber::EnvFilter;

/// Log output format.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LogFormat {
    /// One JSON object a line (for log collectors).
    #[default]
    Json,
    /// Human-readable lines.
    Text,
}

/// Install the global subscriber (once; later calls are ignored).
pub fn init(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    use std::io::IsTerminal;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    let _ = match format {
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .try_init(),
        LogFormat::Text => builder.try_init(),
    };
}
