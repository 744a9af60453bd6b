//! The settings layer (`settings`), driven by real command lines (clap's parse) over files
//! read from `/project/chimera.toml`.

use super::args::{Cli, Command, RunArgs, ServeArgs};
use super::settings::groups::Answer;
use super::settings::{self, check, keys, layer_into, Layered, McpServer, TakesSettings};
use chimera_host::config::{self, Loaded};
use chimera_host::state::FailPolicy;
use clap::{ArgMatches, CommandFactory, FromArgMatches};
use serde_json::json;
use std::path::PathBuf;

const FILE: &str = "/project/chimera.toml";

/// `text` as read from `/project/chimera.toml`.
fn project_file(text: &str) -> Loaded {
    let path = PathBuf::from(FILE);
    Loaded {
        table: config::parse(&path, text).unwrap(),
        text: text.to_owned(),
        path,
    }
}

/// `chimera ARGS…` parsed: the innermost matches and the command.
fn parse(args: &[&str]) -> (ArgMatches, Command) {
    let argv = std::iter::once("chimera").chain(args.iter().copied());
    let matches = Cli::command().try_get_matches_from(argv).unwrap();
    let cli = Cli::from_arg_matches(&matches).unwrap();
    let mut inner = &matches;
    while let Some((_, sub)) = inner.subcommand() {
        inner = sub;
    }
    (inner.clone(), cli.command)
}

/// `args` (a command that takes settings, as `matches` parsed it) with
/// `loaded` layered in, and the layers.
fn layered<A: TakesSettings>(loaded: &Loaded, matches: &ArgMatches, mut args: A) -> (A, Layered) {
    let layered = layer_into(Some(loaded), matches, &mut args).unwrap();
    (args, layered)
}

fn run(loaded: &Loaded, args: &[&str]) -> (RunArgs, Layered) {
    let argv: Vec<&str> = ["run"].iter().chain(args).copied().collect();
    match parse(&argv) {
        (matches, Command::Run(run)) => layered(loaded, &matches, run),
        _ => unreachable!(),
    }
}

fn serve(loaded: &Loaded, args: &[&str]) -> (ServeArgs, Layered) {
    let argv: Vec<&str> = ["serve"].iter().chain(args).copied().collect();
    match parse(&argv) {
        (matches, Command::Serve(serve)) => layered(loaded, &matches, serve),
        _ => unreachable!(),
    }
}

/// Where `key`'s value came from.
fn origin(layered: &Layered, key: &str) -> String {
    layered.figment.find_metadata(key).unwrap().name.to_string()
}

#[test]
fn the_file_fills_what_no_flag_set_and_flags_win() {
    let loaded = project_file(
        "plugins_dirs = [\"plugins\"]\n[[packs]]\nname = \"redactor\"\n[[packs]]\nname = \"plan-gate\"\nconfig = { max = 3 }\n[trust]\nquarantine_after = 5\nprobe_on_reload = false\n[session]\nmax_steps = 7\nstrategy = \"tree-of-thought\"\nstrategy_config = { candidates = 2 }\naudit = \"audit.jsonl\"\nbash_sandbox = false\n",
    );
    let (args, layered) = run(&loaded, &["--max-steps", "9", "--audit", "mine.jsonl"]);
    assert_eq!(
        args.load.search.plugins_dirs,
        [PathBuf::from("/project/plugins")]
    );
    assert_eq!(args.load.pack.packs, ["redactor", "plan-gate={\"max\":3}"]);
    assert_eq!(args.load.trust.quarantine_after, 5);
    assert!(!args.load.trust.probe_on_reload);
    assert!(!args.session.bash_sandbox);
    assert_eq!(args.session.max_steps, 9, "the flag wins");
    assert_eq!(
        args.session.audit,
        Some(PathBuf::from("mine.jsonl")),
        "a path on the command line is the command line's"
    );
    assert_eq!(args.session.strategy.as_deref(), Some("tree-of-thought"));
    assert_eq!(
        args.session.strategy_config.as_deref(),
        Some("{\"candidates\":2}")
    );
    assert_eq!(origin(&layered, "session.max_steps"), "command line");
    assert_eq!(origin(&layered, "trust.quarantine_after"), FILE);
    assert_eq!(origin(&layered, "trust.call_budget_ms"), "default");
    // A flag that turns a default off, over a file that does not say.
    let (args, layered) = run(&project_file(""), &["--no-bash-sandbox"]);
    assert!(!args.session.bash_sandbox);
    assert_eq!(origin(&layered, "session.bash_sandbox"), "command line");
}

#[test]
fn a_list_on_the_command_line_replaces_the_file_s_and_leaves_its_packs_modes() {
    let loaded = project_file(
        "[[packs]]\nname = \"redactor\"\nisolate = true\nmode = \"monitor\"\n[approvals]\nask = [\"bash\", \"write_file\"]\n[mcp.servers.fs]\ncommand = \"npx\"\n",
    );
    let (args, layered) = run(&loaded, &[]);
    assert_eq!(args.load.pack.isolate, ["redactor"]);
    assert_eq!(args.load.pack.monitor, ["redactor"]);
    assert_eq!(origin(&layered, "isolate"), FILE);
    assert_eq!(args.mcp.servers.len(), 1);
    let (args, layered) = run(
        &loaded,
        &[
            "--pack",
            "plan-gate",
            "--ask",
            "read_file",
            "--mcp",
            "echo=cat",
        ],
    );
    assert_eq!(args.load.pack.packs, ["plan-gate"]);
    assert!(args.load.pack.isolate.is_empty() && args.load.pack.monitor.is_empty());
    assert_eq!(origin(&layered, "monitor"), "default");
    assert_eq!(args.approvals.ask, ["read_file"]);
    assert!(matches!(&args.mcp.servers[..], [McpServer::Flag(f)] if f == "echo=cat"));
    // `--isolate` alone keeps the file's packs and replaces its names.
    let (args, _) = run(&loaded, &["--isolate", "other"]);
    assert_eq!(args.load.pack.packs, ["redactor"]);
    assert_eq!(args.load.pack.isolate, ["other"]);
}

#[test]
fn the_command_line_s_model_source_and_way_of_answering_replace_the_file_s_whole() {
    let loaded = project_file(
        "[provider]\nname = \"openai\"\nmodel = \"gpt-file\"\n[approvals]\nanswers_file = \"answers.jsonl\"\n",
    );
    let (args, _) = run(&loaded, &["--script", "s.json", "--yes"]);
    assert_eq!(args.provider.script, Some(PathBuf::from("s.json")));
    assert_eq!(args.provider.name, None, "not mixed in from the file");
    assert_eq!(args.provider.model.as_deref(), Some("gpt-file"));
    assert_eq!(args.approvals.answer, Some(Answer::Yes));
    assert_eq!(args.approvals.answers_file, None);
    let (args, layered) = run(&loaded, &["--no"]);
    assert_eq!(args.approvals.answer, Some(Answer::No));
    assert_eq!(origin(&layered, "approvals.answer"), "command line");
    let (args, _) = run(&loaded, &[]);
    assert_eq!(args.provider.name.as_deref(), Some("openai"));
    assert_eq!(
        args.approvals.answers_file,
        Some(PathBuf::from("/project/answers.jsonl"))
    );
}

#[test]
fn the_serve_section_fills_what_no_flag_set_and_a_flag_upstream_is_taken_whole() {
    let loaded = project_file(
        "[[packs]]\nname = \"redactor\"\n[serve]\nlisten = \"127.0.0.1:9000\"\nconcurrency = 8\nkey_concurrency = 3\naudit = \"a.jsonl\"\n[serve.openai]\nbase_url = \"http://file/v1\"\nkey_env = \"FILE_KEY\"\nmodels = [\"gpt-file\"]\n[serve.anthropic]\nbase_url = \"http://file-a\"\nmodels = [\"claude-file\"]\n",
    );
    let (args, layered) = serve(
        &loaded,
        &[
            "--concurrency",
            "2",
            "--upstream",
            "http://flag/v1",
            "--model",
            "gpt-flag",
        ],
    );
    let gateway = &args.serve;
    assert_eq!(args.load.pack.packs, ["redactor"]);
    assert_eq!(gateway.listen.to_string(), "127.0.0.1:9000");
    assert_eq!(gateway.concurrency, 2, "the flag wins");
    assert_eq!(gateway.limits.key_concurrency, 3);
    assert_eq!(gateway.audit, Some(PathBuf::from("/project/a.jsonl")));
    assert_eq!(gateway.openai.base_url.as_deref(), Some("http://flag/v1"));
    assert_eq!(gateway.openai.models, ["gpt-flag"]);
    assert_eq!(
        gateway.openai.key_env, None,
        "not mixed in from the file's upstream"
    );
    assert_eq!(origin(&layered, "serve.openai.key_env"), "default");
    assert_eq!(gateway.anthropic.base_url.as_deref(), Some("http://file-a"));
    assert_eq!(gateway.anthropic.models, ["claude-file"]);
}

#[test]
fn a_packs_on_unavailable_fail_open_is_serves_fail_open_and_the_flag_wins() {
    let loaded = project_file(
        "[[packs]]\nname = \"redactor\"\non_unavailable = \"fail_open\"\n[[packs]]\nname = \"stop-words\"\non_unavailable = \"fail_closed\"\n",
    );
    let (args, _) = serve(&loaded, &[]);
    assert_eq!(args.serving.fail_open, ["redactor"]);
    let (args, _) = serve(&loaded, &["--fail-open", "stop-words"]);
    assert_eq!(args.serving.fail_open, ["stop-words"], "the flag wins");
    let error = check(&project_file(
        "[[packs]]\nname = \"a\"\non_unavailable = \"open\"\n",
    ))
    .unwrap_err()
    .to_string();
    assert!(error.contains("open"), "{error}");
}

#[test]
fn the_state_section_names_the_store_and_each_packs_policy_and_a_flag_wins() {
    let loaded = project_file(
        "[state]\nredis = \"redis://127.0.0.1:6379\"\ntimeout_ms = 50\non_unavailable = \"fail_open\"\n[state.policies]\ntoken-budget = \"fail_closed\"\n",
    );
    let (args, layered) = serve(&loaded, &["--state-timeout-ms", "20"]);
    assert_eq!(args.state.redis.as_deref(), Some("redis://127.0.0.1:6379"));
    assert_eq!(args.state.timeout_ms, 20, "the flag wins");
    assert_eq!(args.state.on_unavailable, FailPolicy::Open);
    assert_eq!(args.state.policies, ["token-budget=fail_closed"]);
    assert_eq!(origin(&layered, "state.on_unavailable"), FILE);
    let shown = serde_json::to_value(&layered.settings).unwrap();
    assert_eq!(shown["state"]["on_unavailable"], json!("fail_open"));
    let error = check(&project_file("[state]\non_unavailable = \"maybe\"\n"))
        .unwrap_err()
        .to_string();
    assert!(error.contains("maybe"), "{error}");
}

#[test]
fn a_key_that_is_no_setting_or_of_the_wrong_type_is_refused_with_its_line() {
    let refused = |text: &str| check(&project_file(text)).unwrap_err().to_string();
    let error = refused("packs = []\n\n[trust]\nprobe = true\nprobbe = true\n");
    assert!(error.starts_with(&format!("{FILE} line 5: ")), "{error}");
    assert!(error.contains("probbe"), "{error}");
    assert!(!error.contains('\n'), "{error}");
    let error = refused("[session]\nmax_steps = \"many\"\n");
    assert!(error.starts_with(&format!("{FILE} line 2: ")), "{error}");
    // A choice names the choices once quoted.
    let error = refused("[state]\non_unavailable = \"nope\"\n");
    assert!(
        error.ends_with("expected `fail_closed` or `fail_open`"),
        "{error}"
    );
    // `packs` is a list of tables, said in the file's words.
    let error = refused("packs = [\"redactor\"]\n");
    assert!(
        error.ends_with("expected a [[packs]] table with a name"),
        "{error}"
    );
    // The pack flags' names are set per `[[packs]]` entry, not as keys.
    let error = refused("isolate = [\"a\"]\n[[packs]]\nname = \"a\"\n");
    assert!(error.contains("isolate"), "{error}");
    let error = refused("[mcp.servers.fs]\ncommand = \"npx\"\nargz = []\n");
    assert!(
        error.contains("line 3") && error.contains("argz"),
        "{error}"
    );
    assert_eq!(
        refused("[approvals]\nanswer = \"yes\"\nanswers_file = \"a.jsonl\"\n"),
        format!("{FILE}: [approvals] sets both answer and answers_file; keep one")
    );
}

#[test]
fn every_setting_config_show_printed_before_is_still_a_key() {
    let keys = keys();
    for key in [
        "plugins_dirs",
        "packs",
        "isolate",
        "monitor",
        "trust.locked",
        "trust.lock",
        "trust.allow_insecure_plugins_dir",
        "trust.probe",
        "trust.probe_on_reload",
        "trust.probe_timeout",
        "trust.quarantine_after",
        "trust.quarantine_window",
        "trust.call_budget_ms",
        "trust.call_budget_per_mib_ms",
        "trust.isolate_processes",
        "provider.name",
        "provider.script",
        "provider.model",
        "provider.base_url",
        "provider.api_key_env",
        "provider.headers",
        "provider.stream",
        "provider.stream_policy",
        "approvals.ask",
        "approvals.deny",
        "approvals.answer",
        "approvals.answers_file",
        "session.audit",
        "session.strategy",
        "session.strategy_config",
        "session.system",
        "session.max_steps",
        "session.workspace",
        "session.prices",
        "session.compact_keep_turns",
        "session.bash_sandbox",
        "mcp.servers",
        "serve.listen",
        "serve.body_cap",
        "serve.header_cap",
        "serve.concurrency",
        "serve.max_sessions",
        "serve.session_scope",
        "serve.upstream_connect_timeout",
        "serve.upstream_timeout",
        "serve.upstream_retries",
        "serve.threads",
        "serve.watch",
        "serve.metrics_key_sha256",
        "serve.metrics_listen",
        "serve.client_key_sha256",
        "serve.stream_policy",
        "serve.audit",
        "serve.openai.base_url",
        "serve.openai.key_env",
        "serve.openai.models",
        "serve.anthropic.base_url",
        "serve.anthropic.key_env",
        "serve.anthropic.models",
        "serve.header_timeout",
        "serve.body_timeout",
        "serve.write_timeout",
        "serve.buffer_cap",
        "serve.key_buffer_cap",
        "serve.key_concurrency",
        "serve.rate_limit_hold",
    ] {
        assert!(keys.iter().any(|k| k == key), "{key}");
    }
    let layered = settings::layered(None, figment::value::Dict::new()).unwrap();
    assert_eq!(origin(&layered, "mcp.servers"), "default");
    let shown = serde_json::to_value(&layered.settings).unwrap();
    assert_eq!(shown["mcp"]["servers"], json!({}));
}
