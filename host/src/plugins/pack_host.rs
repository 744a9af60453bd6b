//! The pack host: the child side of an isolated pack.
//!
//! Started as `chimera pack-host --pack NAME[=CONFIG]` with the sealed pack
//! on its standard input and its end of the control socket as its standard
//! output. It moves the socket to a fresh descriptor and points fd 1 at
//! stderr at once (a pack's `println!` cannot corrupt the framing), loads
//! exactly the sealed bytes, builds the pack, confines itself, says hello
//! and then serves calls until the host hangs up or says shutdown.

use crate::isolate::sandbox::{confine_pack_host, Limits};
use crate::isolate::transport::{spin_budget, Spinning, CHILD_SPIN};
use crate::isolate::wire::{self, FromHost, Hello, WIRE_VERSION};
use crate::plugins::loader::Loader;
use abi_stable::std_types::RStr;
use chimera_plugin_api::abi::{Decision, DecisionKind, Registration, Seam};
use std::io::{BufReader, BufWriter, Write};
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;

/// Serves pack `pack` (built from `config`) over the socket this process
/// was handed as its standard output. Returns when the host hangs up or
/// asks it to stop; an error is one line (also sent to the host).
pub(crate) fn serve(pack: &str, config: &str) -> Result<(), String> {
    let socket = rustix::io::dup(std::io::stdout().as_fd())
        .map_err(|e| format!("cannot take the control socket: {e}"))?;
    rustix::stdio::dup2_stdout(std::io::stderr().as_fd())
        .map_err(|e| format!("cannot point stdout at stderr: {e}"))?;
    let socket = UnixStream::from(socket);
    let mut out = BufWriter::new(
        socket
            .try_clone()
            .map_err(|e| format!("cannot use the control socket: {e}"))?,
    );
    let mut buf = Vec::new();
    let loaded = load(pack, config);
    let (instance, registrations, hello) = match loaded {
        Ok(loaded) => loaded,
        Err(line) => {
            let _ = wire::write_frame(&mut out, wire::failed(&mut buf, &line));
            let _ = out.flush();
            return Err(line);
        }
    };
    // The sandbox: one-way, after loading (the loader reads the sealed
    // file and maps it) and before the first call.
    let mut hello = hello;
    // Asked before the sandbox: it reads the CPU set and cgroup quota.
    let spin = spin_budget(CHILD_SPIN);
    hello.warnings = confine_pack_host(&Limits::default());
    send(&mut out, wire::hello(&mut buf, &hello))?;
    // Between calls the child polls for a while before it blocks: a call
    // that follows soon finds it awake.
    let mut input = BufReader::new(Spinning { socket, spin });
    let mut frame = Vec::new();
    loop {
        if wire::read_frame(&mut input, &mut frame).is_err() {
            // The host hung up (or sent garbage): nothing left to serve.
            return Ok(());
        }
        match wire::decode_from_host(&frame) {
            Ok(FromHost::Call {
                seq,
                seam,
                indices,
                input,
            }) => {
                let mut allowed = 0u32;
                let mut decision = None;
                input.with_view(Seam(seam), |view| {
                    for &index in &indices {
                        let Some(registration) = registrations.get(index as usize) else {
                            decision = Some(Decision::error(format!(
                                "the pack host has no interceptor #{index}"
                            )));
                            break;
                        };
                        let answer = registration.interceptor.intercept(view);
                        if answer.kind != DecisionKind::ALLOW || answer.value.is_some() {
                            decision = Some(answer);
                            break;
                        }
                        allowed += 1;
                    }
                });
                send(
                    &mut out,
                    wire::reply(&mut buf, seq, allowed, decision.as_ref()),
                )?;
            }
            Ok(FromHost::Export { seq }) => {
                let state = instance.export_state();
                send(&mut out, wire::state(&mut buf, seq, state.as_str()))?;
            }
            Ok(FromHost::Import { seq, json }) => {
                let outcome = instance
                    .import_state(RStr::from_str(&json))
                    .into_result()
                    .map_err(abi_stable::std_types::RString::into_string);
                send(
                    &mut out,
                    wire::imported(
                        &mut buf,
                        seq,
                        outcome.as_ref().copied().map_err(String::as_str),
                    ),
                )?;
            }
            Ok(FromHost::Shutdown) | Err(_) => return Ok(()),
        }
    }
}

fn send(out: &mut BufWriter<UnixStream>, frame: &[u8]) -> Result<(), String> {
    wire::write_frame(out, frame)
        .and_then(|()| out.flush())
        .map_err(|e| format!("the host hung up: {e}"))
}

type Loaded = (
    chimera_plugin_api::abi::PackInstanceBox,
    Vec<Registration>,
    Hello,
);

/// Loads the sealed pack on stdin and builds `pack` from `config`.
fn load(pack: &str, config: &str) -> Result<Loaded, String> {
    let loader = Loader::new();
    let library = loader.open_inherited_stdin().map_err(|e| e.to_string())?;
    let description = library.pack(Some(pack)).map_err(|e| e.to_string())?.clone();
    let instance = library
        .instantiate(pack, config)
        .map_err(|e| e.to_string())?;
    let registrations = instance.registrations().into_vec();
    let policy_json = instance
        .extension(
            RStr::from_str(chimera_plugin_api::sdk::FAILURE_POLICY_METHOD),
            RStr::from_str("{}"),
        )
        .into_result()
        .map(abi_stable::std_types::RString::into_string)
        .unwrap_or_default();
    let hello = Hello {
        wire_version: WIRE_VERSION,
        name: description.name,
        version: description.version,
        description: description.description,
        registrations: registrations
            .iter()
            .map(|r| (r.seam.0, r.name.as_str().to_owned()))
            .collect(),
        policy_json,
        warnings: Vec::new(),
    };
    Ok((instance, registrations, hello))
}
