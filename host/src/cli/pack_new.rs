//! `chimera pack new NAME [--path DIR] [--sdk-path DIR]`: a pack crate that
//! builds, tests and loads as it is — a `tool_call` gate with a JSON
//! config, a policy test case with its golden file, a `cargo test` that
//! replays it, and a README on building, checking, installing and
//! hot-swapping it.
//!
//! The files come from `host/templates/pack/`, embedded at build time. The
//! crate is written into a temporary directory beside the target and
//! renamed into place, so a failure leaves nothing half-written.

use super::args::PackNewArgs;
use super::failure::Failure;
use chimera_host::agent::read_user_file;
use chimera_host::config::{BUNDLED_LIBRARY, BUNDLED_PACKAGES};
use chimera_host::plugins::platform::library_file_name;
use chimera_host::types::terminal_safe;
use std::path::{Path, PathBuf};

/// The case the template ships, without its extension.
const TEMPLATE_CASE: &str = "tests/cases/blocks-a-denied-command";

/// Each generated file: its path in the crate and its template.
const TEMPLATES: &[(&str, &str)] = &[
    (
        "Cargo.toml",
        include_str!("../../templates/pack/Cargo.toml.tmpl"),
    ),
    (
        "README.md",
        include_str!("../../templates/pack/README.md.tmpl"),
    ),
    (
        ".gitignore",
        include_str!("../../templates/pack/gitignore.tmpl"),
    ),
    (
        "src/lib.rs",
        include_str!("../../templates/pack/src/lib.rs.tmpl"),
    ),
    (
        "tests/policy.rs",
        include_str!("../../templates/pack/tests/policy.rs.tmpl"),
    ),
    (
        "tests/cases/blocks-a-denied-command.toml",
        include_str!("../../templates/pack/tests/cases/blocks-a-denied-command.toml.tmpl"),
    ),
    (
        "tests/cases/blocks-a-denied-command.golden.jsonl",
        include_str!("../../templates/pack/tests/cases/blocks-a-denied-command.golden.jsonl.tmpl"),
    ),
];

/// The SDK's manifest and the workspace's, as this host was built with
/// them: the SDK version a generated crate asks the registry for.
const SDK_MANIFEST: &str = include_str!("../../../plugin-api/Cargo.toml");
const WORKSPACE_MANIFEST: &str = include_str!("../../../Cargo.toml");

/// The SDK's package name.
const SDK_PACKAGE: &str = "chimera-plugin-api";

/// Names Rust or Cargo keep for themselves.
const RESERVED: &[&str] = &[
    "abstract",
    "alloc",
    "as",
    "async",
    "await",
    "become",
    "box",
    "break",
    "const",
    "continue",
    "core",
    "crate",
    "do",
    "dyn",
    "else",
    "enum",
    "extern",
    "false",
    "final",
    "fn",
    "for",
    "gen",
    "if",
    "impl",
    "in",
    "let",
    "loop",
    "macro",
    "match",
    "mod",
    "move",
    "mut",
    "override",
    "priv",
    "proc_macro",
    "pub",
    "ref",
    "return",
    "self",
    "static",
    "std",
    "struct",
    "super",
    "test",
    "trait",
    "true",
    "try",
    "type",
    "typeof",
    "unsafe",
    "unsized",
    "use",
    "virtual",
    "where",
    "while",
    "yield",
];

/// Type names the generated `lib.rs` already uses: a pack named after one
/// gets `Pack` appended to its type.
const TAKEN_TYPES: &[&str] = &[
    "Arc",
    "Config",
    "Decision",
    "Default",
    "Deserialize",
    "Option",
    "Pack",
    "PackError",
    "Registrar",
    "Result",
    "SeamKind",
    "String",
    "Vec",
];

/// Where the generated crate's SDK dependency points.
enum Sdk {
    /// The registry version this host was built with.
    Registry(String),
    /// A local SDK crate, and why it was chosen.
    Path(PathBuf, &'static str),
}

impl Sdk {
    fn dependency(&self, features: &str) -> String {
        match self {
            Sdk::Registry(version) => {
                format!(
                    "{{ version = {}{features} }}",
                    toml::Value::from(version.as_str())
                )
            }
            Sdk::Path(dir, _) => format!(
                "{{ path = {}{features} }}",
                toml::Value::from(dir.display().to_string())
            ),
        }
    }

    fn describe(&self) -> String {
        match self {
            Sdk::Registry(version) => {
                format!("SDK: {SDK_PACKAGE} = \"{version}\" from crates.io (the version this chimera was built with)")
            }
            Sdk::Path(dir, why) => format!(
                "SDK: {SDK_PACKAGE} from {} ({why})",
                terminal_safe(&dir.display().to_string())
            ),
        }
    }
}

pub(crate) fn new(args: PackNewArgs) -> Result<(), Failure> {
    check_name(&args.name)?;
    let sdk = sdk(args.sdk_path.as_deref())?;
    let target = args
        .path
        .clone()
        .unwrap_or_else(|| PathBuf::from(&args.name));
    let shown = terminal_safe(&target.display().to_string());
    refuse_existing(&target, &shown)?;
    let files = render(&args.name, &sdk);
    write_crate(&target, &shown, &files)?;
    let library = library_file_name(&args.name);
    println!("Created pack `{}` in {shown}", args.name);
    println!("{}", sdk.describe());
    println!("Next:");
    println!("  cd {shown}");
    println!("  cargo build                # target/debug/{library}");
    println!("  chimera pack test .        # replay {TEMPLATE_CASE}.toml");
    println!("  cargo test                 # the same, from cargo");
    println!(
        "  chimera run --plugins-dir \"${{CARGO_TARGET_DIR:-target}}\"/debug --pack {} --script FILE \"a prompt\"",
        args.name
    );
    Ok(())
}

/// A pack name: lowercase ASCII letters, digits and single inner hyphens,
/// starting with a letter; not a Rust keyword or a bundled pack's name.
fn check_name(name: &str) -> Result<(), Failure> {
    let shown = terminal_safe(name);
    let well_formed = name.len() <= 64
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.ends_with('-')
        && !name.contains("--");
    if !well_formed {
        return Err(Failure::usage(format!(
            "pack name '{shown}': use lowercase letters, digits and single hyphens, starting with a letter, at most 64 characters (e.g. my-gate)"
        )));
    }
    if RESERVED.contains(&name.replace('-', "_").as_str()) {
        return Err(Failure::usage(format!(
            "pack name '{shown}' is reserved by Rust or Cargo; choose another (e.g. {name}-gate)"
        )));
    }
    if BUNDLED_PACKAGES.contains(&name) {
        return Err(Failure::usage(format!(
            "pack name '{shown}' is a pack bundled with chimera, and a name two files provide is refused at load; choose another"
        )));
    }
    if name == BUNDLED_LIBRARY {
        return Err(Failure::usage(format!(
            "pack name '{shown}' is the file name of chimera's bundled packs in one library; choose another"
        )));
    }
    Ok(())
}

/// `--sdk-path`, else the checkout this chimera was built from (when it
/// still exists), else the registry.
fn sdk(explicit: Option<&Path>) -> Result<Sdk, Failure> {
    if let Some(dir) = explicit {
        let shown = terminal_safe(&dir.display().to_string());
        let manifest = read_user_file(&dir.join("Cargo.toml"), 1 << 20).map_err(|reason| {
            Failure::usage(format!("--sdk-path {shown}: Cargo.toml: {reason}"))
        })?;
        if package_field(&manifest, "name").as_deref() != Some(SDK_PACKAGE) {
            return Err(Failure::usage(format!(
                "--sdk-path {shown}: not the {SDK_PACKAGE} crate (its Cargo.toml names another package)"
            )));
        }
        return Ok(Sdk::Path(absolute(dir, &shown)?, "--sdk-path"));
    }
    let checkout = Path::new(env!("CARGO_MANIFEST_DIR")).join("../plugin-api");
    if checkout.join("Cargo.toml").is_file() {
        let shown = terminal_safe(&checkout.display().to_string());
        return Ok(Sdk::Path(
            absolute(&checkout, &shown)?,
            "this chimera runs from a checkout; --sdk-path DIR chooses another",
        ));
    }
    Ok(Sdk::Registry(sdk_version()))
}

/// `dir`, canonical; the path must be UTF-8 to be written into Cargo.toml.
fn absolute(dir: &Path, shown: &str) -> Result<PathBuf, Failure> {
    let canonical = dir
        .canonicalize()
        .map_err(|e| Failure::usage(format!("--sdk-path {shown}: {e}")))?;
    if canonical.to_str().is_none() {
        return Err(Failure::usage(format!(
            "--sdk-path {shown}: the path is not UTF-8, which Cargo.toml cannot hold"
        )));
    }
    Ok(canonical)
}

/// `[package] <field>` of a manifest, when it is a string.
fn package_field(manifest: &str, field: &str) -> Option<String> {
    let table: toml::Table = toml::from_str(manifest).ok()?;
    table
        .get("package")?
        .get(field)?
        .as_str()
        .map(str::to_owned)
}

/// The SDK version this host was built with (its own, or the workspace's
/// when it inherits that).
fn sdk_version() -> String {
    package_field(SDK_MANIFEST, "version")
        .or_else(|| {
            let table: toml::Table = toml::from_str(WORKSPACE_MANIFEST).ok()?;
            let version = table.get("workspace")?.get("package")?.get("version")?;
            version.as_str().map(str::to_owned)
        })
        .unwrap_or_else(|| env!("CARGO_PKG_VERSION").to_owned())
}

/// The type name for pack `name`: `my-gate` → `MyGate`.
fn type_name(name: &str) -> String {
    let camel: String = name
        .split('-')
        .map(|part| {
            let mut chars = part.chars();
            chars.next().map_or_else(String::new, |first| {
                first.to_ascii_uppercase().to_string() + chars.as_str()
            })
        })
        .collect();
    if TAKEN_TYPES.contains(&camel.as_str()) {
        format!("{camel}Pack")
    } else {
        camel
    }
}

/// Every file of the crate for pack `name`, its placeholders filled in.
fn render(name: &str, sdk: &Sdk) -> Vec<(&'static str, String)> {
    let values = [
        ("{{name}}", name.to_owned()),
        ("{{type_name}}", type_name(name)),
        ("{{library_file}}", library_file_name(name)),
        ("{{sdk_dependency}}", sdk.dependency("")),
        (
            "{{sdk_dev_dependency}}",
            sdk.dependency(", features = [\"testing\"]"),
        ),
    ];
    TEMPLATES
        .iter()
        .map(|(path, template)| {
            let text = values
                .iter()
                .fold((*template).to_owned(), |text, (key, value)| {
                    text.replace(key, value)
                });
            (*path, text)
        })
        .collect()
}

/// Refuses a target that exists and is not an empty directory.
fn refuse_existing(target: &Path, shown: &str) -> Result<(), Failure> {
    let Ok(metadata) = std::fs::symlink_metadata(target) else {
        return Ok(());
    };
    let empty_dir = metadata.is_dir()
        && std::fs::read_dir(target).is_ok_and(|mut entries| entries.next().is_none());
    if empty_dir {
        return Ok(());
    }
    Err(Failure::usage(format!(
        "{shown} already exists and is not an empty directory; choose another --path"
    )))
}

/// Writes `files` into a temporary directory beside `target`, then renames
/// it into place (over an empty directory there).
fn write_crate(target: &Path, shown: &str, files: &[(&str, String)]) -> Result<(), Failure> {
    let cannot = |e: std::io::Error| Failure::usage(format!("cannot create {shown}: {e}"));
    let parent = target
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent).map_err(cannot)?;
    let staging = tempfile::Builder::new()
        .prefix(".chimera-pack-new-")
        .tempdir_in(parent)
        .map_err(cannot)?;
    for (path, text) in files {
        let file = staging.path().join(path);
        if let Some(dir) = file.parent() {
            std::fs::create_dir_all(dir).map_err(cannot)?;
        }
        std::fs::write(&file, text).map_err(cannot)?;
    }
    #[cfg(unix)]
    {
        // The staging directory is private; the crate is not.
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(staging.path(), std::fs::Permissions::from_mode(0o755))
            .map_err(cannot)?;
    }
    if target.is_dir() {
        std::fs::remove_dir(target).map_err(cannot)?;
    }
    std::fs::rename(staging.path(), target).map_err(cannot)?;
    // Renamed: there is nothing left for the guard to remove.
    let _ = staging.keep();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_name_is_one_line_saying_what_a_name_may_hold() {
        for (name, says) in [
            ("", "use lowercase letters"),
            ("My-Gate", "use lowercase letters"),
            ("my_gate", "use lowercase letters"),
            ("9gate", "use lowercase letters"),
            ("gate-", "use lowercase letters"),
            ("a--b", "use lowercase letters"),
            ("../evil", "use lowercase letters"),
            ("gate\u{1b}[2J", "use lowercase letters"),
            ("self", "reserved"),
            ("test", "reserved"),
            ("plan-gate", "bundled with chimera"),
            ("chimera-packs", "bundled packs in one library"),
        ] {
            let failure = check_name(name).unwrap_err();
            assert_eq!(failure.status, 2);
            assert!(failure.message.contains(says), "{name}: {failure}");
            assert!(!failure.message.contains('\n'));
            assert!(!failure.message.contains('\u{1b}'), "{failure}");
        }
        for name in ["my-gate", "gate2", "a-1"] {
            check_name(name).unwrap();
        }
    }

    #[test]
    fn every_placeholder_is_filled_and_the_type_name_never_collides() {
        let sdk = Sdk::Registry("0.1.0".into());
        for (path, text) in render("my-gate", &sdk) {
            assert!(!text.contains("{{"), "{path} keeps a placeholder");
        }
        let files = render("my-gate", &sdk);
        let manifest = &files.iter().find(|(p, _)| *p == "Cargo.toml").unwrap().1;
        let parsed: toml::Table = toml::from_str(manifest).unwrap();
        assert_eq!(
            parsed["dependencies"][SDK_PACKAGE]["version"].as_str(),
            Some("0.1.0")
        );
        assert_eq!(
            parsed["dev-dependencies"][SDK_PACKAGE]["features"][0].as_str(),
            Some("testing")
        );
        assert_eq!(type_name("my-gate"), "MyGate");
        assert_eq!(type_name("config"), "ConfigPack");
        assert_eq!(type_name("a-1"), "A1");
    }

    #[cfg(unix)]
    #[test]
    fn an_sdk_path_whose_manifest_is_a_fifo_or_another_crate_is_refused_without_waiting() {
        let dir = tempfile::tempdir().unwrap();
        rustix::fs::mknodat(
            rustix::fs::CWD,
            dir.path().join("Cargo.toml"),
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        let failure = sdk(Some(dir.path())).err().unwrap();
        assert!(
            failure.message.ends_with("Cargo.toml: not a regular file"),
            "{failure}"
        );
        let other = tempfile::tempdir().unwrap();
        std::fs::write(
            other.path().join("Cargo.toml"),
            "[package]\nname = \"serde\"\nversion = \"1.0.0\"\n",
        )
        .unwrap();
        let failure = sdk(Some(other.path())).err().unwrap();
        assert!(
            failure.message.contains("not the chimera-plugin-api crate"),
            "{failure}"
        );
        let sdk_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../plugin-api");
        assert!(matches!(
            sdk(Some(&sdk_dir)),
            Ok(Sdk::Path(_, "--sdk-path"))
        ));
    }

    #[test]
    fn the_sdk_version_is_the_one_this_host_was_built_with() {
        let version = sdk_version();
        assert!(version.starts_with("0."), "{version}");
        let path = Sdk::Path(PathBuf::from("/opt/sdk \"quoted\""), "test");
        let parsed: toml::Table =
            toml::from_str(&format!("dep = {}", path.dependency(""))).unwrap();
        assert_eq!(parsed["dep"]["path"].as_str(), Some("/opt/sdk \"quoted\""));
    }
}
