//! `chimera serve`: loads the packs, then serves the gateway until Ctrl-C
//! or SIGTERM (requests in flight finish first).

use super::args::ServeArgs;
use super::failure::Failure;
use super::wiring::load_packs;
use chimera_host::agent::EventBus;
use chimera_host::config::search_path;
use chimera_host::gateway::{Gateway, GatewayConfig};
use chimera_host::plugins::{PluginManager, Registry};
use chimera_host::tools::Workspace;
use std::io::Write as _;
use std::sync::Arc;

/// Runs `chimera serve`.
pub(crate) fn serve(args: ServeArgs) -> Result<(), Failure> {
    let upstream_key = match &args.upstream_key_env {
        Some(var) => Some(std::env::var(var).map_err(|_| {
            Failure::usage(format!("--upstream-key-env {var}: the variable is not set"))
        })?),
        None => None,
    };
    for hash in &args.client_key_hashes {
        if hash.len() != 64 || !hash.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(Failure::usage(format!(
                "--client-key-sha256 {}: not a SHA-256 in hex (64 hex digits)",
                chimera_host::types::one_line(hash)
            )));
        }
    }
    let registry = Arc::new(Registry::new());
    let manager = PluginManager::with_search_path(
        Arc::clone(&registry),
        search_path(&args.search.plugins_dirs),
    );
    load_packs(&manager, &args.packs, &EventBus::new())?;
    let root = tempfile::tempdir()
        .map_err(|e| Failure::run_failed(format!("cannot make the gateway's workspace: {e}")))?;
    let workspace = Workspace::new(root.path())
        .map_err(|e| Failure::run_failed(format!("cannot open the gateway's workspace: {e}")))?;
    let config = GatewayConfig {
        upstream_key,
        client_key_hashes: args
            .client_key_hashes
            .iter()
            .map(|h| h.to_ascii_lowercase())
            .collect(),
        body_cap: args.body_cap,
        concurrency: args.concurrency,
        ..GatewayConfig::new(args.upstream.clone(), args.models.clone())
    };
    let gateway = Arc::new(Gateway::new(&config, registry, workspace));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::run_failed(format!("cannot start the server's runtime: {e}")))?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(args.listen)
            .await
            .map_err(|e| Failure::usage(format!("cannot listen on {}: {e}", args.listen)))?;
        let address = listener
            .local_addr()
            .map_err(|e| Failure::run_failed(format!("cannot read the listening address: {e}")))?;
        let mut stdout = std::io::stdout();
        let _ = writeln!(stdout, "listening on http://{address}");
        let _ = stdout.flush();
        gateway
            .serve(listener, shutdown_signal())
            .await
            .map_err(|e| Failure::run_failed(format!("the server stopped: {e}")))
    })?;
    // Kept until the server is done: the workspace's directory.
    drop(manager);
    drop(root);
    Ok(())
}

/// Completes on Ctrl-C or, on Unix, SIGTERM.
async fn shutdown_signal() {
    let interrupt = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    {
        let terminate = async {
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(mut signal) => {
                    signal.recv().await;
                }
                Err(_) => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            () = interrupt => {}
            () = terminate => {}
        }
    }
    #[cfg(not(unix))]
    interrupt.await;
}
