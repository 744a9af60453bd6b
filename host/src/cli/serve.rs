//! `chimera serve`: loads the packs, then serves the gateway until Ctrl-C
//! or SIGTERM (requests in flight finish first). `chimera.toml`'s
//! `[serve]` section gives what no flag does.

use super::args::{ClientLimitArgs, GatewayArgs, ServeArgs, StateArgs};
use super::audit_log;
use super::failure::Failure;
use super::server::{server_packs, PackFlags, ServerPacks};
use chimera_host::gateway::{
    key_hash, ClientLimits, Gateway, GatewayConfig, MetricsAccess, Upstream,
};
use chimera_host::providers::HttpSettings;
use chimera_host::state::{FailPolicy, GateState, RedisStore, StateService};
use chimera_host::tools::Workspace;
use std::collections::BTreeMap;
use std::io::Write as _;
use std::sync::Arc;
use std::time::Duration;

/// Runs `chimera serve`.
pub(crate) fn serve(args: ServeArgs) -> Result<(), Failure> {
    if let Some(var) = &args.hash_key {
        let key = std::env::var(var)
            .map_err(|_| Failure::usage(format!("--hash-key: the variable {var} is not set")))?;
        println!("{}", key_hash(key.trim()));
        return Ok(());
    }
    let gateway = &args.serve;
    let openai = upstream(
        "--upstream",
        gateway.openai.base_url.as_deref(),
        gateway.openai.key_env.as_deref(),
        &gateway.openai.models,
    )?;
    let anthropic = upstream(
        "--anthropic-upstream",
        gateway.anthropic.base_url.as_deref(),
        gateway.anthropic.key_env.as_deref(),
        &gateway.anthropic.models,
    )?;
    if openai.is_none() && anthropic.is_none() {
        return Err(Failure::usage(
            "serve needs an upstream: --upstream URL --upstream-model NAME (chat completions) \
             and/or --anthropic-upstream URL --anthropic-model NAME (messages)",
        ));
    }
    check_client_keys(gateway)?;
    if gateway.threads == Some(0) {
        return Err(Failure::usage(
            "--threads 0: at least one thread must serve",
        ));
    }
    let state = gate_state(&args.state)?;
    let ServerPacks {
        registry,
        manager,
        watching,
    } = server_packs(
        "chimera serve",
        &args.load,
        &PackFlags {
            fail_open: &args.serving.fail_open,
            watch: gateway.watch,
        },
        |manager| {
            manager.set_state(state.clone());
            Ok(())
        },
    )?;
    let root = tempfile::tempdir()
        .map_err(|e| Failure::run_failed(format!("cannot make the gateway's workspace: {e}")))?;
    let workspace = Workspace::new(root.path())
        .map_err(|e| Failure::run_failed(format!("cannot open the gateway's workspace: {e}")))?;
    let mut server = Gateway::new(
        &gateway_config(gateway, openai, anthropic),
        registry,
        workspace,
    )
    .with_state(state.service().clone());
    let audit = gateway
        .audit
        .as_deref()
        .map(|path| audit_log::open(path, &manager))
        .transpose()?;
    if let Some(audit) = &audit {
        server = server.with_audit(audit.clone());
    }
    let server = Arc::new(server);
    let lanes = chimera_host::lanes::count(gateway.threads);
    listen(server, gateway.listen, gateway.metrics_listen, lanes)?;
    audit_log::finish(audit.as_ref(), gateway.audit.as_deref())?;
    // Kept until the server is done: the watcher, the manager (whose
    // packs the registry's chains call) and the workspace's directory.
    drop(watching);
    drop(manager);
    drop(root);
    Ok(())
}

/// Serves `gateway` on `address` (and `/metrics` on `metrics`, when
/// given) on `lanes` lanes ([`chimera_host::lanes`]: each accepts from the
/// one listening socket and serves what it accepted) until Ctrl-C or
/// SIGTERM, saying where on stdout.
fn listen(
    gateway: Arc<Gateway>,
    address: std::net::SocketAddr,
    metrics: Option<std::net::SocketAddr>,
    lanes: usize,
) -> Result<(), Failure> {
    let bind = |address: std::net::SocketAddr| {
        let listener = std::net::TcpListener::bind(address)
            .map_err(|e| Failure::usage(format!("cannot listen on {address}: {e}")))?;
        let taken = listener
            .set_nonblocking(true)
            .and_then(|()| listener.local_addr())
            .map_err(|e| Failure::run_failed(format!("cannot read the listening address: {e}")))?;
        Ok::<_, Failure>((listener, taken))
    };
    let (listener, taken) = bind(address)?;
    let mut stdout = std::io::stdout();
    if let Some(line) = gateway.stream_line() {
        tracing::warn!("{line}");
    }
    let apart = metrics.map(bind).transpose()?;
    let _ = writeln!(stdout, "listening on http://{taken}");
    if let Some((_, taken)) = &apart {
        let _ = writeln!(stdout, "metrics on http://{taken}/metrics");
    }
    let _ = stdout.flush();
    let apart = std::sync::Mutex::new(apart.map(|(listener, _)| listener));
    // The first lane hears the signal and tells every lane.
    let stop = Arc::new(tokio::sync::watch::channel(false).0);
    let served = chimera_host::lanes::run(lanes, |lane| {
        let gateway = Arc::clone(&gateway);
        let mine = listener.try_clone();
        let stop = Arc::clone(&stop);
        let metrics = if lane == 0 {
            apart.lock().ok().and_then(|mut apart| apart.take())
        } else {
            None
        };
        async move {
            if lane == 0 {
                let stop = Arc::clone(&stop);
                tokio::spawn(async move {
                    shutdown_signal().await;
                    stop.send_replace(true);
                });
            }
            let served = serve_lane(lane, gateway, mine, metrics, &stop).await;
            if served.is_err() {
                // One lane failed: the others stop too, and it is said.
                stop.send_replace(true);
            }
            served
        }
    })
    .map_err(|e| Failure::run_failed(format!("cannot start the server's runtime: {e}")))?;
    served.into_iter().collect()
}

/// One lane: `/metrics` apart when it is given `metrics`, then `gateway`
/// on its handle of the listening socket until `stop` says so.
async fn serve_lane(
    lane: usize,
    gateway: Arc<Gateway>,
    listener: std::io::Result<std::net::TcpListener>,
    metrics: Option<std::net::TcpListener>,
    stop: &tokio::sync::watch::Sender<bool>,
) -> Result<(), Failure> {
    if let Some(metrics) = metrics {
        let apart = tokio::net::TcpListener::from_std(metrics)
            .map_err(|e| Failure::run_failed(format!("cannot listen for /metrics: {e}")))?;
        let router = Arc::clone(&gateway).metrics_router();
        tokio::spawn(async move { axum::serve(apart, router).await });
    }
    let listener = listener
        .and_then(tokio::net::TcpListener::from_std)
        .map_err(|e| Failure::run_failed(format!("cannot accept on lane {lane}: {e}")))?;
    let mut stopping = stop.subscribe();
    let stopped = async move {
        // The sender lives as long as the lanes: an error is never seen,
        // and would stop them too.
        let _ = stopping.wait_for(|stop| *stop).await;
    };
    gateway
        .serve(listener, stopped)
        .await
        .map_err(|e| Failure::run_failed(format!("the server stopped: {e}")))
}

/// `--client-key-sha256` and `--metrics-key-sha256` values are SHA-256s
/// in hex, and
/// `--session-scope key` has them.
fn check_client_keys(args: &GatewayArgs) -> Result<(), Failure> {
    let named = args
        .client_key_sha256
        .iter()
        .map(|h| ("--client-key-sha256", h));
    let metrics = args
        .metrics_key_sha256
        .iter()
        .map(|h| ("--metrics-key-sha256", h));
    for (flag, hash) in named.chain(metrics) {
        if hash.len() != 64 || !hash.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(Failure::usage(format!(
                "{flag} {}: not a SHA-256 in hex (64 hex digits)",
                chimera_host::types::one_line(hash)
            )));
        }
    }
    if args.session_scope == chimera_host::gateway::SessionScope::Key
        && args.client_key_sha256.is_empty()
    {
        return Err(Failure::usage(
            "--session-scope key needs client keys (--client-key-sha256): without them any \
             key a client makes up is a conversation, and a budget, of its own",
        ));
    }
    Ok(())
}

/// The gateway's settings from `args` (its upstreams already read).
fn gateway_config(
    args: &GatewayArgs,
    openai: Option<Upstream>,
    anthropic: Option<Upstream>,
) -> GatewayConfig {
    GatewayConfig {
        openai,
        anthropic,
        client_key_hashes: args
            .client_key_sha256
            .iter()
            .map(|h| h.to_ascii_lowercase())
            .collect(),
        body_cap: args.body_cap,
        header_cap: args.header_cap,
        concurrency: args.concurrency,
        max_sessions: args.max_sessions,
        session_scope: args.session_scope,
        http: HttpSettings {
            connect_timeout: Duration::from_secs(args.upstream_connect_timeout.max(1)),
            read_timeout: Duration::from_secs(args.upstream_timeout.max(1)),
            ..HttpSettings::default()
        },
        upstream_retries: args.upstream_retries.min(10),
        stream_policy: args.stream_policy.into(),
        limits: client_limits(&args.limits),
        metrics: {
            let key = args
                .metrics_key_sha256
                .as_ref()
                .map(|h| h.to_ascii_lowercase());
            match (args.metrics_listen, key) {
                (Some(_), key) => MetricsAccess::Apart(key),
                (None, Some(key)) => MetricsAccess::Key(key),
                (None, None) => MetricsAccess::Listener,
            }
        },
    }
}

/// What one client may hold, from `--header-timeout` and the rest (a
/// timeout of 0 is taken as one second).
fn client_limits(args: &ClientLimitArgs) -> ClientLimits {
    let seconds = |secs: u64| Duration::from_secs(secs.max(1));
    ClientLimits {
        header_timeout: seconds(args.header_timeout),
        body_timeout: seconds(args.body_timeout),
        write_timeout: seconds(args.write_timeout),
        buffer_cap: args.buffer_cap,
        key_buffer_cap: args.key_buffer_cap,
        key_concurrency: args.key_concurrency,
        rate_limit_hold: Duration::from_secs(args.rate_limit_hold),
    }
}

/// The gate state `--state-*` (or `[state]`) describe: Redis when a URL
/// is given, else this process; an outage's first and last lines on
/// stderr.
fn gate_state(args: &StateArgs) -> Result<GateState, Failure> {
    let mut policies = BTreeMap::new();
    for spec in &args.policies {
        let (pack, policy) = spec
            .split_once('=')
            .map(|(pack, policy)| (pack.trim(), policy.trim().parse::<FailPolicy>()))
            .filter(|(pack, _)| !pack.is_empty())
            .ok_or_else(|| {
                Failure::usage(format!(
                    "--state-policy {}: expected NAME=fail_closed or NAME=fail_open",
                    chimera_host::types::one_line(spec)
                ))
            })?;
        let policy = policy.map_err(|e| Failure::usage(format!("--state-policy {pack}: {e}")))?;
        policies.insert(pack.to_owned(), policy);
    }
    let Some(url) = &args.redis else {
        return Ok(GateState::new(
            StateService::in_process(),
            args.on_unavailable,
            policies,
        ));
    };
    let timeout = Duration::from_millis(args.timeout_ms.max(1));
    let store =
        RedisStore::new(url, timeout).map_err(|e| Failure::usage(format!("--state-redis {e}")))?;
    let service = StateService::new(Arc::new(store), |line| {
        eprintln!("chimera serve: {line}");
    });
    Ok(GateState::new(service, args.on_unavailable, policies))
}

/// The upstream `flag` names, with its key read from `key_env` and its
/// `models`: `None` when the flag is not given; a usage error when models
/// come without it, it comes without models, or the key's variable is unset.
fn upstream(
    flag: &str,
    base_url: Option<&str>,
    key_env: Option<&str>,
    models: &[String],
) -> Result<Option<Upstream>, Failure> {
    let Some(base_url) = base_url else {
        if models.is_empty() && key_env.is_none() {
            return Ok(None);
        }
        return Err(Failure::usage(format!(
            "models or a key were given for {flag}, but not {flag} URL itself"
        )));
    };
    if models.is_empty() {
        return Err(Failure::usage(format!(
            "{flag} {base_url}: name the models it serves (--model / --anthropic-model NAME)"
        )));
    }
    let key =
        match key_env {
            Some(var) => Some(std::env::var(var).map_err(|_| {
                Failure::usage(format!("{flag}: the key variable {var} is not set"))
            })?),
            None => None,
        };
    Ok(Some(Upstream {
        base_url: base_url.to_owned(),
        key,
        models: models.to_vec(),
    }))
}

/// Completes on Ctrl-C or, on Unix, SIGTERM.
pub(super) async fn shutdown_signal() {
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
