//! `cronverb schema extract`: the schema of a package's `#[cron]` jobs, read from its sources.

use std::path::{Path, PathBuf};
use std::process::Command;

use cron_schema::Schema;
use serde_json::Value;

use super::source::{self, Extraction};
use super::{Failure, Format, print};

/// Print the schema of a package's `#[cron]` jobs, read from its sources without building it
///
/// By default the library and every binary of the package are read (what a deployed application links);
/// `--lib`, `--bin`, `--example` and `--examples` choose other targets. An invalid `#[cron]` is reported as
/// `file:line:column: message`, with the compiler's message, and the exit status is 2.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The package's Cargo.toml; a virtual workspace manifest reads every member [default: the nearest
    /// Cargo.toml from the current directory up]
    #[arg(long, value_name = "PATH")]
    manifest_path: Option<PathBuf>,

    /// How to print the schema
    #[arg(long, value_enum, default_value_t)]
    format: Format,

    /// Read the library target
    #[arg(long)]
    lib: bool,

    /// Read the binary target NAME (repeatable)
    #[arg(long, value_name = "NAME")]
    bin: Vec<String>,

    /// Read the example target NAME (repeatable)
    #[arg(long, value_name = "NAME")]
    example: Vec<String>,

    /// Read every example target
    #[arg(long)]
    examples: bool,
}

/// A target whose sources are read.
#[derive(Debug)]
struct Target {
    /// The crate name: the target's name with `-` replaced by `_`, as `module_path!()` starts with it.
    krate: String,
    /// The root file, relative to the workspace root.
    root: PathBuf,
}

pub fn run(args: Args) -> Result<(), Failure> {
    let manifest = match &args.manifest_path {
        Some(path) if path.is_file() => path.clone(),
        Some(path) => {
            return Err(Failure::Invalid(format!(
                "error: manifest `{}` does not exist",
                path.display()
            )));
        }
        None => nearest_manifest()?,
    };
    let metadata = metadata(&manifest)?;
    let workspace_root =
        PathBuf::from(metadata["workspace_root"].as_str().ok_or_else(|| {
            Failure::Other("error: `cargo metadata` gave no workspace_root".into())
        })?);
    let targets = targets(&args, &metadata, &manifest, &workspace_root)?;

    let mut extraction = Extraction::default();
    for target in &targets {
        source::extract_crate(
            &workspace_root,
            &target.krate,
            &target.root,
            &mut extraction,
        );
    }
    if !extraction.errors.is_empty() {
        extraction.errors.sort();
        extraction.errors.dedup();
        let messages: Vec<String> = extraction
            .errors
            .iter()
            .map(|e| format!("{}:{}:{}: {}", e.file, e.line, e.column, e.message))
            .collect();
        return Err(Failure::Invalid(messages.join("\n")));
    }
    let schema = Schema::new(extraction.verbs);
    match args.format {
        Format::Text => print(&schema.to_string()),
        Format::Json => print(&schema.to_json()),
    }
}

/// The first `Cargo.toml` in the current directory or one of its parents.
fn nearest_manifest() -> Result<PathBuf, Failure> {
    let cwd = std::env::current_dir()
        .map_err(|error| Failure::Other(format!("error: no current directory: {error}")))?;
    cwd.ancestors()
        .map(|dir| dir.join("Cargo.toml"))
        .find(|path| path.is_file())
        .ok_or_else(|| {
            Failure::Invalid(format!(
                "error: no Cargo.toml in `{}` or any parent directory; pass --manifest-path",
                cwd.display()
            ))
        })
}

/// `cargo metadata --no-deps` for the manifest.
fn metadata(manifest: &Path) -> Result<Value, Failure> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let output = Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--manifest-path",
        ])
        .arg(manifest)
        .output()
        .map_err(|error| Failure::Other(format!("error: cannot run cargo: {error}")))?;
    if !output.status.success() {
        return Err(Failure::Invalid(format!(
            "error: `cargo metadata` failed for `{}`:\n{}",
            manifest.display(),
            String::from_utf8_lossy(&output.stderr).trim_end()
        )));
    }
    serde_json::from_slice(&output.stdout).map_err(|error| {
        Failure::Other(format!(
            "error: cannot read the output of `cargo metadata`: {error}"
        ))
    })
}

/// The targets to read: the package of `manifest` (every member when it is a virtual manifest), and in it
/// the targets the arguments choose.
fn targets(
    args: &Args,
    metadata: &Value,
    manifest: &Path,
    workspace_root: &Path,
) -> Result<Vec<Target>, Failure> {
    let packages = metadata["packages"].as_array().cloned().unwrap_or_default();
    let manifest = manifest
        .canonicalize()
        .unwrap_or_else(|_| manifest.to_owned());
    let own: Vec<&Value> = packages
        .iter()
        .filter(|package| {
            package["manifest_path"]
                .as_str()
                .and_then(|path| Path::new(path).canonicalize().ok())
                .is_some_and(|path| path == manifest)
        })
        .collect();
    let packages: Vec<&Value> = if own.is_empty() {
        packages.iter().collect()
    } else {
        own
    };

    let default = !args.lib && args.bin.is_empty() && args.example.is_empty() && !args.examples;
    let mut targets = Vec::new();
    let mut found_bins = Vec::new();
    let mut found_examples = Vec::new();
    for package in packages {
        for target in package["targets"].as_array().into_iter().flatten() {
            let name = target["name"].as_str().unwrap_or_default();
            let kinds: Vec<&str> = target["kind"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            let is_lib = kinds.iter().any(|kind| {
                matches!(
                    *kind,
                    "lib" | "rlib" | "dylib" | "cdylib" | "staticlib" | "proc-macro"
                )
            });
            let wanted = if is_lib {
                default || args.lib
            } else if kinds.contains(&"bin") {
                found_bins.push(name.to_owned());
                default || args.bin.iter().any(|bin| bin == name)
            } else if kinds.contains(&"example") {
                found_examples.push(name.to_owned());
                args.examples || args.example.iter().any(|example| example == name)
            } else {
                false
            };
            if !wanted {
                continue;
            }
            let Some(src_path) = target["src_path"].as_str() else {
                continue;
            };
            let src_path = Path::new(src_path);
            targets.push(Target {
                krate: name.replace('-', "_"),
                root: src_path
                    .strip_prefix(workspace_root)
                    .unwrap_or(src_path)
                    .to_owned(),
            });
        }
    }
    for (kind, asked, found) in [
        ("binary", &args.bin, &found_bins),
        ("example", &args.example, &found_examples),
    ] {
        if let Some(missing) = asked.iter().find(|name| !found.contains(name)) {
            return Err(Failure::Invalid(format!(
                "error: no {kind} target named `{missing}`; the {kind} targets are: {}",
                if found.is_empty() {
                    "(none)".to_owned()
                } else {
                    found.join(", ")
                }
            )));
        }
    }
    Ok(targets)
}
