//! `tollgate-gateway`: an HTTP reverse proxy with tollgate rate limits in its hot path.
//!
//! ```sh
//! cargo run --release -p tollgate-gateway -- --quota "5/s burst 10"
//! cargo run --release -p tollgate-gateway -- --config gateway/gateway.toml
//! curl -i http://127.0.0.1:8080/    # 200 ... then 429 with Retry-After and RateLimit fields
//! ```
//!
//! `--help` lists the flags; `docs/gateway.md` describes the configuration file and walks
//! through a run.

mod counters;
mod file;
mod flags;
mod forms;
mod forwarding;
mod held;
mod limiter;
mod metrics;
mod redis;
mod reload;
mod routing;
mod serve;
mod settings;
mod tables;
mod trust;
mod upstream;
mod words;

use std::process::ExitCode;
use std::sync::Arc;

use arc_swap::ArcSwap;

use counters::Counters;
use flags::Flags;
use routing::Table;

#[tokio::main]
async fn main() -> ExitCode {
    let flags = Flags::read();
    match run(flags).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("tollgate-gateway: {error}");
            ExitCode::FAILURE
        }
    }
}

/// Reads the configuration, builds every route's limiter, checks Redis, and only then
/// listens, prints the banner and serves: a configuration the gateway cannot honour fails
/// before anything is printed.
async fn run(flags: Flags) -> Result<(), String> {
    let (settings, loaded) = match &flags.config {
        Some(path) => {
            let (settings, text) = file::read(path, &flags)?;
            (settings, Some((path.clone(), text)))
        }
        None => (flags.quick_start()?, None),
    };
    // The recorder first: each route registers its series when it is built.
    let metrics = match settings.metrics {
        Some(address) => Some(metrics::start(address).await?),
        None => None,
    };
    let table = Table::build(settings, None).await?;
    redis::check(&table, redis::Checked::Every).await?;
    let listener = serve::listen(table.settings.listen)?;
    let bound = listener
        .local_addr()
        .map_err(|e| format!("--listen {}: {e}", table.settings.listen))?;
    for line in words::banner(&table.settings, bound) {
        println!("{line}");
    }
    if let Some(address) = metrics {
        println!("metrics on http://{address}/metrics");
    }
    let table = Arc::new(ArcSwap::from_pointee(table));
    if let Some((path, text)) = loaded {
        reload::watch(path, text, flags, Arc::clone(&table))?;
    }
    let counters = Arc::new(Counters::default());
    let sampled = Arc::clone(&table);
    Arc::clone(&counters).print_every_second(move || {
        let table = sampled.load();
        table.sample_keys();
        redis::report(&table)
    });
    serve::serve(listener, table, counters).await;
    Ok(())
}
