//! `chimera demo`: the embedded default. A scripted session with the three
//! bundled packs loaded by name from the search path, showing each policy
//! at work: a shell call blocked until a plan, the plan, the allowed calls,
//! a secret scrubbed on the wire and in a tool result, and a `spawn_` call
//! turned into a delegated sub-agent task.

use super::args::DemoArgs;
use super::failure::Failure;
use super::wiring::{load_packs, Host};
use chimera_host::providers::{Provider, ScriptedModel};
use chimera_host::tools::Workspace;
use chimera_host::types::Headers;
use std::sync::Arc;

const SCRIPT: &str = include_str!("demo.json");
const PROMPT: &str = "Set up the demo project. My deploy key is sk-demo-0123456789abcdef.";
const PACKS: [&str; 3] = ["plan-gate", "redactor", "delegate-spawner"];

pub(crate) fn demo(args: DemoArgs) -> Result<(), Failure> {
    let model = ScriptedModel::from_json(SCRIPT)
        .map_err(|e| Failure::usage(format!("the embedded demo script is broken: {e}")))?
        .with_headers(Headers(vec![(
            "Authorization".to_owned(),
            "Bearer sk-demo-wire-0123456789".to_owned(),
        )]));
    let model = Arc::new(model);
    let scratch = tempfile::Builder::new()
        .prefix("chimera-demo-")
        .tempdir()
        .map_err(|e| Failure::usage(format!("cannot create the demo workspace: {e}")))?;
    let workspace = Workspace::new(scratch.path())
        .map_err(|e| Failure::usage(format!("demo workspace: {e}")))?;

    let host = Host::new(&args.search, args.json);
    let specs: Vec<String> = PACKS.iter().map(|p| (*p).to_owned()).collect();
    load_packs(&host.manager, &specs, &host.bus).map_err(|failure| {
        Failure::pack(format!(
            "{failure} (build the packs first: cargo build --release)"
        ))
    })?;
    let provider: Arc<dyn Provider> = model.clone();
    let mut session = host.session(provider, workspace, (25, true), &[]).build();
    let result = session.run_turn(PROMPT);

    if !args.json {
        println!();
        println!("On the wire (what the model received on its last call, after the seams):");
        if let Some(last) = model.recorded().last() {
            if let Some(user) = last
                .messages
                .iter()
                .find(|m| m.role == chimera_host::types::Role::User)
            {
                println!("  user: {}", user.content);
            }
            for (name, value) in last.headers.iter().flat_map(Headers::iter) {
                println!("  header {name}: {value}");
            }
        }
        println!(
            "In the durable transcript, the user message keeps its text: {}",
            session.history()[1].content
        );
    }
    if args.keep_workspace {
        let kept = scratch.keep();
        // With --json, stdout holds events only: the path goes to stderr.
        if args.json {
            eprintln!("workspace kept at {}", kept.display());
        } else {
            println!("Workspace kept at {}", kept.display());
        }
    }
    if result.success {
        Ok(())
    } else {
        Err(Failure::run_failed(format!(
            "the demo run failed: {}",
            result.output
        )))
    }
}
