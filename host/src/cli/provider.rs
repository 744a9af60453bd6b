//! Which model a `chimera run` talks to: the scripted model, or a real
//! provider chosen by `--provider`, with its URL, model and key from flags,
//! the environment and defaults.

use super::args::RunArgs;
use super::failure::Failure;
use super::status;
use chimera_host::providers::{
    AnthropicConfig, AnthropicProvider, HttpSettings, OpenAiConfig, OpenAiProvider, Provider,
    ScriptedModel,
};
use chimera_host::types::Headers;
use std::path::Path;
use std::sync::Arc;

/// What differs between the real providers on the command line.
struct Remote {
    /// `--provider` value.
    name: &'static str,
    /// The variable a base URL may come from.
    base_url_env: &'static str,
    /// The official endpoint.
    default_base_url: &'static str,
    /// The variable the key comes from unless `--api-key-env` names another.
    key_env: &'static str,
    /// A base URL on this host needs a key.
    official_host: &'static str,
}

const OPENAI_NAME: &str = "openai";
const ANTHROPIC_NAME: &str = "anthropic";

const OPENAI: Remote = Remote {
    name: OPENAI_NAME,
    base_url_env: "OPENAI_BASE_URL",
    default_base_url: "https://api.openai.com/v1",
    key_env: "OPENAI_API_KEY",
    official_host: "api.openai.com",
};

const ANTHROPIC: Remote = Remote {
    name: ANTHROPIC_NAME,
    base_url_env: "ANTHROPIC_BASE_URL",
    default_base_url: "https://api.anthropic.com",
    key_env: "ANTHROPIC_API_KEY",
    official_host: "api.anthropic.com",
};

/// Where and as whom a real provider is reached.
struct Endpoint {
    base_url: String,
    model: String,
    api_key: Option<String>,
}

/// `--provider openai|anthropic` without `--model`: the flag a user most
/// often forgets, so it is named before anything else is checked (the
/// prompt, the workspace, headers, keys).
pub(crate) fn require_model(args: &RunArgs) -> Result<(), Failure> {
    let provider = &args.provider;
    match (&provider.script, provider.name.as_deref(), &provider.model) {
        (None, Some(name @ (OPENAI_NAME | ANTHROPIC_NAME)), None) => Err(needs_model(name)),
        _ => Ok(()),
    }
}

fn needs_model(provider: &str) -> Failure {
    Failure::usage(format!("--provider {provider} needs --model M"))
}

/// The provider `args` ask for.
pub(crate) fn provider(args: &RunArgs) -> Result<Arc<dyn Provider>, Failure> {
    require_model(args)?;
    let headers = args
        .provider
        .headers
        .iter()
        .map(|h| parse_header(h))
        .collect::<Result<Vec<_>, _>>()?;
    if args.record_requests.is_some() && args.provider.script.is_none() {
        return Err(Failure::usage("--record-requests works with --script only"));
    }
    match (&args.provider.script, args.provider.name.as_deref()) {
        (Some(_), Some(provider)) if provider != "scripted" => Err(Failure::usage(format!(
            "--script and --provider {provider} cannot be used together"
        ))),
        (Some(script), _) => scripted(script, headers, args.record_requests.as_deref()),
        (None, Some(OPENAI_NAME)) => {
            let endpoint = endpoint(args, &OPENAI)?;
            let provider = OpenAiProvider::new(OpenAiConfig {
                base_url: endpoint.base_url,
                model: endpoint.model,
                api_key: endpoint.api_key,
                headers: Headers(headers),
                http: HttpSettings::default(),
            });
            let provider =
                status::observe_retries(provider, args.json, OpenAiProvider::with_retry_observer);
            Ok(status::show_model_waits(Arc::new(provider), args.json))
        }
        (None, Some(ANTHROPIC_NAME)) => {
            if !headers.is_empty() {
                return Err(Failure::usage(
                    "--header: the anthropic provider has no per-request header surface",
                ));
            }
            let endpoint = endpoint(args, &ANTHROPIC)?;
            let provider = AnthropicProvider::new(AnthropicConfig {
                base_url: endpoint.base_url,
                model: endpoint.model,
                api_key: endpoint.api_key,
                max_tokens: 4096,
                http: HttpSettings::default(),
            });
            let provider = status::observe_retries(
                provider,
                args.json,
                AnthropicProvider::with_retry_observer,
            );
            Ok(status::show_model_waits(Arc::new(provider), args.json))
        }
        (None, Some("scripted")) => Err(Failure::usage(
            "the scripted provider needs a script: --script FILE (or [provider] script)",
        )),
        (None, Some(other)) => Err(Failure::usage(format!(
            "unknown provider '{other}' (known: openai, anthropic; or --script FILE)"
        ))),
        (None, None) => Err(Failure::usage(
            "no model: give --script FILE, or --provider openai|anthropic --model M",
        )),
    }
}

/// The model (see [`require_model`]), the base URL and the key for `remote`.
fn endpoint(args: &RunArgs, remote: &Remote) -> Result<Endpoint, Failure> {
    let model = args
        .provider
        .model
        .clone()
        .ok_or_else(|| needs_model(remote.name))?;
    let base_url = args
        .provider
        .base_url
        .clone()
        .or_else(|| {
            std::env::var(remote.base_url_env)
                .ok()
                .filter(|v| !v.is_empty())
        })
        .unwrap_or_else(|| remote.default_base_url.to_owned());
    let official = base_url.contains(remote.official_host);
    Ok(Endpoint {
        api_key: api_key(args, remote.key_env, official)?,
        model,
        base_url,
    })
}

fn scripted(
    script: &Path,
    headers: Vec<(String, String)>,
    record: Option<&Path>,
) -> Result<Arc<dyn Provider>, Failure> {
    let mut model = ScriptedModel::from_file(script).map_err(|e| Failure::usage(e.to_string()))?;
    if !headers.is_empty() {
        model = model.with_headers(Headers(headers));
    }
    if let Some(path) = record {
        model = model.record_to(path).map_err(|error| {
            Failure::usage(format!("--record-requests {}: {error}", path.display()))
        })?;
    }
    Ok(Arc::new(model))
}

/// The key from `--api-key-env VAR` (which must then be set) or from the
/// provider's usual variable; required only by the official endpoints.
fn api_key(args: &RunArgs, default_env: &str, required: bool) -> Result<Option<String>, Failure> {
    let (name, explicit) = match &args.provider.api_key_env {
        Some(name) => (name.as_str(), true),
        None => (default_env, false),
    };
    match std::env::var(name).ok().filter(|v| !v.is_empty()) {
        Some(key) => Ok(Some(key)),
        None if explicit => Err(Failure::usage(format!(
            "--api-key-env {name}: the variable is not set"
        ))),
        None if required => Err(Failure::usage(format!(
            "set {name} (or name another variable with --api-key-env VAR)"
        ))),
        None => Ok(None),
    }
}

/// Parses `K: V` or `K:V`. The name must be an HTTP token and the value may
/// not hold control characters (a CR or LF would start a header of its own).
fn parse_header(spec: &str) -> Result<(String, String), Failure> {
    let shown = chimera_host::types::terminal_safe(spec);
    let Some((name, value)) = spec
        .split_once(':')
        .map(|(n, v)| (n.trim(), v.trim()))
        .filter(|(n, _)| !n.is_empty())
    else {
        return Err(Failure::usage(format!(
            "--header '{shown}': expected `Name: value`"
        )));
    };
    let token = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
    if !name.chars().all(token) {
        return Err(Failure::usage(format!(
            "--header '{shown}': the name may hold only letters, digits and !#$%&'*+-.^_`|~"
        )));
    }
    if value.chars().any(|c| c.is_control() && c != '\t') {
        return Err(Failure::usage(format!(
            "--header '{shown}': the value holds a control character (CR, LF, …); a header is one line"
        )));
    }
    Ok((name.to_owned(), value.to_owned()))
}
