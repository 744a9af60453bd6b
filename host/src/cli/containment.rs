//! What every command that loads packs sets up around them, alike for
//! `run` and the servers (`serve`, `mcp guard`): trust (the lock, probes,
//! quarantine and call budgets), which packs run isolated in a child
//! process, which only monitor, and the watcher that hot-swaps rebuilt
//! packs.

use super::args::TrustArgs;
use super::failure::Failure;
use super::spec::parse_pack_spec;
use chimera_host::agent::{AgentEvent, EventBus};
use chimera_host::interception::{HealthEvent, HealthPolicy, HealthSink};
use chimera_host::isolate::Isolation;
use chimera_host::plugins::trust::{Probe, TrustSettings};
use chimera_host::plugins::{watch, PluginManager, ReloadEvent, WatchOptions, Watcher};
use std::sync::Arc;
use std::time::Duration;

/// Applies the trust and containment flags to `manager`; quarantines and
/// budget overruns are published on `bus`.
pub(crate) fn configure_trust(
    manager: &PluginManager,
    args: &TrustArgs,
    bus: &EventBus,
) -> Result<(), Failure> {
    let probe =
        Probe::current_exe(Duration::from_secs(args.probe_timeout.max(1))).map_err(|e| {
            Failure::usage(format!(
                "cannot locate the chimera executable for probing: {e}"
            ))
        })?;
    manager.set_trust(TrustSettings {
        locked: args.locked || args.lock.is_some(),
        lock_file: args.lock.clone(),
        allow_insecure: args.allow_insecure_plugins_dir,
        probe_on_load: args.probe.then(|| probe.clone()),
        probe_on_reload: args.probe_on_reload.then_some(probe),
    });
    let policy = HealthPolicy {
        max_errors: args.quarantine_after.max(1),
        window: Duration::from_secs(args.quarantine_window),
        call_budget: (args.call_budget_ms > 0).then(|| Duration::from_millis(args.call_budget_ms)),
        per_mib: Duration::from_millis(args.call_budget_per_mib_ms),
        ..HealthPolicy::default()
    };
    let events = bus.clone();
    let sink: HealthSink = Arc::new(move |event| {
        events.publish(match event {
            HealthEvent::Quarantined { pack, reason } => {
                AgentEvent::PackQuarantined { name: pack, reason }
            }
            HealthEvent::OverBudget {
                interceptor,
                seam,
                elapsed,
                budget,
                ..
            } => AgentEvent::InterceptorSlow {
                seam: seam.to_owned(),
                interceptor,
                elapsed_ms: u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX),
                budget_ms: u64::try_from(budget.as_millis()).unwrap_or(u64::MAX),
            },
        });
    });
    manager.set_health(policy, Some(sink));
    Ok(())
}

/// The most processes one isolated pack runs (`--isolate-processes`).
const MAX_ISOLATE_PROCESSES: usize = 64;

/// `--isolate NAME` (each a pack `--pack` loads) and `CHIMERA_ISOLATE`
/// (`all`, or comma-separated names): which packs run in a child process.
pub(crate) fn configure_isolation(
    manager: &PluginManager,
    packs: &[String],
    isolate: &[String],
    trust: &TrustArgs,
) -> Result<(), Failure> {
    check_loaded("--isolate", packs, isolate)?;
    let from_env = std::env::var("CHIMERA_ISOLATE").unwrap_or_default();
    let all = from_env.trim() == "all";
    let mut names = isolate.to_vec();
    if !all {
        names.extend(
            from_env
                .split(',')
                .map(str::trim)
                .filter(|n| !n.is_empty())
                .map(str::to_owned),
        );
    }
    if names.is_empty() && !all {
        return Ok(());
    }
    let mut isolation = Isolation::current_exe(names, all).map_err(|e| {
        Failure::usage(format!(
            "cannot locate the chimera executable for isolated packs: {e}"
        ))
    })?;
    isolation.start_timeout = Duration::from_secs(trust.probe_timeout.max(1));
    isolation.processes = trust.isolate_processes.clamp(1, MAX_ISOLATE_PROCESSES);
    manager.set_isolation(Some(isolation));
    Ok(())
}

/// `--monitor NAME` (each a pack `--pack` loads): which packs run in
/// monitor mode, their decisions recorded but never enforced.
pub(crate) fn configure_monitoring(
    manager: &PluginManager,
    packs: &[String],
    monitor: &[String],
) -> Result<(), Failure> {
    check_loaded("--monitor", packs, monitor)?;
    manager.set_monitored(monitor.iter().cloned());
    Ok(())
}

/// Refuses, naming `flag`, a name in `names` that no `--pack` spec of
/// `packs` loads.
pub(crate) fn check_loaded(flag: &str, packs: &[String], names: &[String]) -> Result<(), Failure> {
    let loaded: Vec<String> = packs
        .iter()
        .filter_map(|spec| parse_pack_spec(spec).ok().map(|(name, _)| name))
        .collect();
    match names.iter().find(|n| !loaded.contains(n)) {
        Some(name) => Err(Failure::usage(format!(
            "{flag} {name}: no pack of that name is loaded (add --pack {name})"
        ))),
        None => Ok(()),
    }
}

/// Hot-swaps rebuilt pack files of `manager`'s packs into the live
/// sessions, publishing each reload (or failed reload) on `bus`.
pub(crate) fn watcher(manager: &Arc<PluginManager>, bus: &EventBus) -> Result<Watcher, Failure> {
    let events = bus.clone();
    watch(Arc::clone(manager), WatchOptions::default(), move |event| {
        if let Some(event) = reload_event(event) {
            events.publish(event);
        }
    })
    .map_err(|error| Failure::usage(error.to_string()))
}

/// The transcript event for a watcher event (a removed file is only logged).
fn reload_event(event: ReloadEvent) -> Option<AgentEvent> {
    match event {
        ReloadEvent::Reloaded(info) => Some(AgentEvent::PackReloaded {
            name: info.name.clone(),
            version: info.version.clone(),
            path: info.path().map(|p| p.display().to_string()),
        }),
        ReloadEvent::Failed { name, error, .. } => Some(AgentEvent::PackReloadFailed {
            name,
            error: error.to_string(),
        }),
        ReloadEvent::Removed { .. } => None,
    }
}
