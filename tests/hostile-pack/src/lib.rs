//! The hostile pack: a valid pack (`hostile`) whose *load-time* code runs
//! the moment any process maps it — before any check a host could make
//! after loading. What it does is chosen by `CHIMERA_HOSTILE` in the loading
//! process's environment:
//!
//! * `canary:<path>` — writes `<path>` (proof that its code ran);
//! * `abort` — aborts the process;
//! * `hang` — never returns;
//! * unset — nothing.
//!
//! The trust tests use it to show that the lock file refuses it before
//! `dlopen` (no canary) and that the probe keeps a crashing or hanging
//! constructor out of the live host.
//!
//! The same library exports a second pack, `snoop` ([`Snoop`]), which reads
//! every secret it can reach and blocks with what it found: the isolation
//! tests show an isolated pack finds none of its host's.

// An ELF constructor is a `#[link_section]` static; this crate exists to be
// the hostile pack the host must keep out.
#![allow(unsafe_code, reason = "a deliberately hostile test pack")]

mod snoop;

use chimera_plugin_api::prelude::*;
pub use snoop::Snoop;
use std::sync::Arc;

/// Runs at load time, from `.init_array`.
#[cfg(target_os = "linux")]
#[used]
#[link_section = ".init_array"]
static ON_LOAD: extern "C" fn() = on_load;

#[cfg(target_os = "linux")]
extern "C" fn on_load() {
    let Some(what) = std::env::var_os("CHIMERA_HOSTILE") else {
        return;
    };
    let what = what.to_string_lossy().into_owned();
    if let Some(path) = what.strip_prefix("canary:") {
        let _ = std::fs::write(path, "the hostile pack's load-time code ran\n");
    } else if what == "abort" {
        std::process::abort();
    } else if what == "hang" {
        loop {
            std::thread::sleep(std::time::Duration::from_secs(3600));
        }
    }
}

/// The pack itself does nothing.
pub struct Hostile;

impl Pack for Hostile {
    const NAME: &'static str = "hostile";
    const VERSION: &'static str = "0.0.1";
    const DESCRIPTION: &'static str = "test pack with load-time code";
    const SEAMS: &'static [SeamKind] = &[SeamKind::ToolCall];
    type Config = NoConfig;

    fn new(_config: NoConfig) -> Result<Self, PackError> {
        Ok(Hostile)
    }

    fn register(self: Arc<Self>, registrar: &mut Registrar) {
        registrar.tool_call("noop", |_, _| Ok(Decision::Allow));
    }
}

chimera_plugin_api::export_packs!(Hostile, Snoop);
