//! The pack host: the child side of an isolated pack.
//!
//! Started as `chimera pack-host --pack NAME[=CONFIG]` with the sealed pack
//! on its standard input, its end of the control socket as its standard
//! output, and an empty environment (`HOME` alone). It first closes every
//! other descriptor it inherited and enters a first Landlock domain (see
//! [`crate::isolate::sandbox`]), then moves the socket to a fresh
//! descriptor and points fd 1 at stderr (a pack's `println!` cannot
//! corrupt the framing), loads exactly the sealed bytes, builds the pack,
//! confines itself, says hello and then serves calls until the host hangs
//! up or says shutdown.

use crate::isolate::sandbox::{before_pack_code, confine_pack_host, Limits};
use crate::isolate::transport::{spin_budget, Spinning, CHILD_SPIN};
use crate::isolate::wire::{self, FromHost, Hello, StateOp, WIRE_VERSION};
use crate::plugins::loader::Loader;
use crate::state::{served, AnswersState, At, StateAnswer, StateKind};
use abi_stable::std_types::{RStr, RString};
use chimera_plugin_api::abi::state::StateServiceArc;
use chimera_plugin_api::abi::{Decision, DecisionKind, Registration, Seam};
use std::io::{BufReader, BufWriter, Write};
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Mutex};

/// Serves pack `pack` (built from `config`) over the socket this process
/// was handed as its standard output. Returns when the host hangs up or
/// asks it to stop; an error is one line (also sent to the host).
pub(crate) fn serve(pack: &str, config: &str, state_shared: bool) -> Result<(), String> {
    // First, before this process opens a descriptor of its own or any of
    // the pack's code runs: close what was inherited, enter a first domain.
    let early_warnings = before_pack_code();
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
    hello.warnings = early_warnings;
    hello.warnings.extend(confine_pack_host(&Limits::default()));
    send(&mut out, wire::hello(&mut buf, &hello))?;
    // Between calls the child polls for a while before it blocks: a call
    // that follows soon finds it awake.
    let conn = Arc::new(Mutex::new(Conn {
        input: BufReader::new(Spinning { socket, spin }),
        out,
        buf,
        frame: Vec::new(),
        seq: 0,
    }));
    // The pack's state operations become frames to the host, answered
    // inside the call that asks them.
    let proxy = Proxy {
        conn: Arc::clone(&conn),
        shared: state_shared,
    };
    let service: StateServiceArc = served(proxy);
    crate::state::offer(&service, &instance).map_err(|refused| refused.0)?;
    loop {
        let message = {
            let mut c = lock(&conn);
            let Conn { input, frame, .. } = &mut *c;
            if wire::read_frame(input, frame).is_err() {
                // The host hung up (or sent garbage): nothing left to serve.
                return Ok(());
            }
            wire::decode_from_host(frame)
        };
        match message {
            Ok(FromHost::Call {
                seq,
                seam,
                indices,
                input,
            }) => {
                lock(&conn).seq = seq;
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
                lock(&conn).send(|buf| wire::reply(buf, seq, allowed, decision.as_ref()))?;
            }
            Ok(FromHost::Export { seq }) => {
                let state = instance.export_state();
                lock(&conn).send(|buf| wire::state(buf, seq, state.as_str()))?;
            }
            Ok(FromHost::Import { seq, json }) => {
                let outcome = instance
                    .import_state(RStr::from_str(&json))
                    .into_result()
                    .map_err(RString::into_string);
                let outcome = outcome.as_ref().copied().map_err(String::as_str);
                lock(&conn).send(|buf| wire::imported(buf, seq, outcome))?;
            }
            Ok(FromHost::Shutdown | FromHost::StateAnswer(_)) | Err(_) => return Ok(()),
        }
    }
}

/// The child's end of the socket: what the serve loop reads calls from
/// and writes replies to, and what a state operation inside a call
/// writes its question to and reads its answer from.
struct Conn {
    input: BufReader<Spinning<UnixStream>>,
    out: BufWriter<UnixStream>,
    buf: Vec<u8>,
    frame: Vec<u8>,
    /// The call being served.
    seq: u64,
}

impl Conn {
    /// Sends the frame `encode` writes.
    fn send(&mut self, encode: impl FnOnce(&mut Vec<u8>) -> &[u8]) -> Result<(), String> {
        let frame = encode(&mut self.buf);
        wire::write_frame(&mut self.out, frame)
            .and_then(|()| self.out.flush())
            .map_err(|e| format!("the host hung up: {e}"))
    }

    /// Asks the host `op` and waits for its answer.
    fn ask(&mut self, op: &StateOp) -> Result<StateAnswer, String> {
        let seq = self.seq;
        self.send(|buf| wire::state_op(buf, seq, op))?;
        wire::read_frame(&mut self.input, &mut self.frame)
            .map_err(|_| "the host hung up during a state operation".to_owned())?;
        match wire::decode_from_host(&self.frame) {
            Ok(FromHost::StateAnswer(answer)) => Ok(answer),
            _ => Err("the host answered a state operation with something else".to_owned()),
        }
    }
}

fn lock(conn: &Mutex<Conn>) -> std::sync::MutexGuard<'_, Conn> {
    conn.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The state service as an isolated pack sees it: each operation a
/// question to the host, which answers it from its own store under this
/// pack's name and policy.
struct Proxy {
    conn: Arc<Mutex<Conn>>,
    shared: bool,
}

impl AnswersState for Proxy {
    fn answer(&self, at: At<'_>, kind: StateKind) -> StateAnswer {
        let op = StateOp {
            scope: at.scope.0,
            conversation: at.conversation.as_str().to_owned(),
            key: at.key.as_str().to_owned(),
            kind,
        };
        lock(&self.conn)
            .ask(&op)
            .unwrap_or_else(StateAnswer::Refused)
    }

    fn is_shared(&self) -> bool {
        self.shared
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
        .map(RString::into_string)
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
