//! `chimera mcp guard`: loads the packs, then relays between the MCP
//! client on standard input and output and the MCP server it starts (see
//! `chimera_host::mcp`). Standard output carries only MCP messages; the
//! guard's own lines (packs loaded, reloaded, a failure) go to standard
//! error. `chimera mcp pin`: lists a server's tools into the MCP lock.

use super::args::{McpGuardArgs, McpPinArgs, PinArgs};
use super::audit_log;
use super::failure::Failure;
use super::server::{server_packs, PackFlags, ServerPacks};
use chimera_host::agent::{Permission, ToolRules};
use chimera_host::mcp::pin::{self, Lock, PinnedServer};
use chimera_host::mcp::Rules;
use std::path::PathBuf;
use std::sync::Arc;

/// The lock file: the one named, or the default one.
fn lock_path(pins: &PinArgs) -> PathBuf {
    pins.mcp_lock
        .clone()
        .unwrap_or_else(|| PathBuf::from(pin::DEFAULT_LOCK))
}

/// The server's pins, when its lock holds them. A lock named with
/// `--lock` must exist; a server it does not hold is guarded unpinned,
/// saying so.
fn pins_of(pins: &PinArgs, command: &[String]) -> Result<Option<PinnedServer>, Failure> {
    let path = lock_path(pins);
    let name = pins
        .server_name
        .clone()
        .unwrap_or_else(|| pin::default_name(command));
    let lock = Lock::read(&path).map_err(|e| Failure::usage(e.to_string()))?;
    let Some(mut lock) = lock else {
        if pins.mcp_lock.is_some() {
            return Err(Failure::usage(format!(
                "the MCP lock {} does not exist (write it with `chimera mcp pin`)",
                path.display()
            )));
        }
        return Ok(None);
    };
    let pinned = lock.servers.remove(&name);
    match &pinned {
        Some(server) => eprintln!(
            "chimera mcp guard: {} tools pinned for {name:?} in {}",
            server.tools.len(),
            path.display()
        ),
        None => eprintln!(
            "chimera mcp guard: {} holds no server named {name:?}: its tools are not pinned",
            path.display()
        ),
    }
    Ok(pinned)
}

/// Runs `chimera mcp pin`: the server's tools, fingerprinted, into the
/// lock (other servers' entries kept).
pub(crate) fn pin(args: McpPinArgs) -> Result<(), Failure> {
    let path = lock_path(&args.pins);
    let name = args
        .pins
        .server_name
        .clone()
        .unwrap_or_else(|| pin::default_name(&args.command));
    let mut lock = Lock::read(&path)
        .map_err(|e| Failure::usage(e.to_string()))?
        .unwrap_or(Lock {
            version: 1,
            ..Lock::default()
        });
    let server = pin::list_tools(&args.command).map_err(|e| Failure::run_failed(e.to_string()))?;
    let count = server.tools.len();
    lock.servers.insert(name.clone(), server);
    lock.write(&path)
        .map_err(|e| Failure::run_failed(e.to_string()))?;
    println!("pinned {count} tools of {name:?} in {}", path.display());
    Ok(())
}

/// Runs `chimera mcp guard`: over stdio in front of the server it starts
/// (exits as the server did), or over streamable HTTP in front of
/// `--url` (until Ctrl-C or SIGTERM).
pub(crate) fn guard(args: McpGuardArgs) -> Result<(), Failure> {
    for rule in args.deny.iter().chain(&args.ask) {
        ToolRules::check(rule).map_err(Failure::usage)?;
    }
    let identity = match &args.url {
        Some(url) => vec![url.clone()],
        None => args.command.clone(),
    };
    let pins = pins_of(&args.pins, &identity)?;
    let ServerPacks {
        registry,
        manager,
        watching,
    } = server_packs(
        "chimera mcp guard",
        &args.load,
        &PackFlags {
            fail_open: &args.serving.fail_open,
            watch: args.watch,
        },
        |_| Ok(()),
    )?;
    let audit = args
        .audit
        .as_deref()
        .map(|path| audit_log::open(path, &manager))
        .transpose()?;
    let rules = Rules {
        policy: Arc::new(
            args.ask
                .iter()
                .map(|tool| (tool, Permission::Ask))
                .chain(args.deny.iter().map(|tool| (tool, Permission::Deny)))
                .fold(
                    ToolRules::new(Permission::Allow),
                    |rules, (tool, permission)| rules.set(tool, permission),
                ),
        ),
        pins,
        audit: audit.clone(),
    };
    let outcome = match &args.url {
        Some(url) => guard_http(&registry, rules, url, &args),
        None => guard_stdio(&registry, rules, &args.command),
    };
    audit_log::finish(audit.as_ref(), args.audit.as_deref())?;
    drop(watching);
    drop(manager);
    outcome
}

/// The guard on standard input and output, in front of `command`.
fn guard_stdio(
    registry: &Arc<chimera_host::plugins::Registry>,
    rules: Rules,
    command: &[String],
) -> Result<(), Failure> {
    let status = chimera_host::mcp::guard(
        registry,
        command,
        std::io::stdin(),
        std::io::stdout(),
        rules,
    )
    .map_err(|e| Failure::run_failed(format!("mcp guard: {e}")))?;
    if status.success() {
        Ok(())
    } else {
        Err(Failure::run_failed(format!(
            "mcp guard: the MCP server {} ended: {status}",
            command[0]
        )))
    }
}

/// The guard serving streamable HTTP on `--listen`, in front of `url`.
fn guard_http(
    registry: &Arc<chimera_host::plugins::Registry>,
    rules: Rules,
    url: &str,
    args: &McpGuardArgs,
) -> Result<(), Failure> {
    // One worker: a client's exchange (its connection, the relay, the
    // server's connection) stays on one thread, with no hand-offs between
    // threads on the way; a judgement that blocks (an isolated pack's
    // round trip) moves off it (`block_in_place`).
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .map_err(|e| Failure::run_failed(format!("cannot start the guard's runtime: {e}")))?;
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind(args.listen)
            .await
            .map_err(|e| Failure::usage(format!("cannot listen on {}: {e}", args.listen)))?;
        let taken = listener
            .local_addr()
            .map_err(|e| Failure::run_failed(format!("cannot read the listening address: {e}")))?;
        println!("listening on http://{taken}/mcp, guarding {url}");
        chimera_host::mcp::serve_http(
            registry,
            rules,
            url,
            listener,
            &args.allowed_hosts,
            super::serve::shutdown_signal(),
        )
        .await
        .map_err(|e| match e {
            chimera_host::mcp::HttpGuardError::Url { .. } => {
                Failure::usage(format!("mcp guard: {e}"))
            }
            e => Failure::run_failed(format!("mcp guard: {e}")),
        })
    })
}
