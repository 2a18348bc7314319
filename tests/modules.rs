//! The default module (docs/runtime.md, "The module"): every binary of a package that runs the package's
//! `#[cron]` functions registers the same module, whatever the executable is called, and it is the module
//! `cronverb schema extract` gives those functions. A package of two binaries sharing a library is built
//! with cargo (in `target/cronverb-fixtures/`, kept between runs) and its programs run as processes.
//!
//! The package depends on cronverb under another name only (`cv = { package = "cronverb" }`), so that
//! `::cronverb` does not resolve in it: its job, `#[cv::cron(…, crate = "cv")]`, compiles, registers and
//! is extracted only if the attribute's `crate` argument (docs/attribute.md, "`crate`") is honoured
//! everywhere.
#![cfg(feature = "cli")]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const MANIFEST: &str = r#"[package]
name = "billing-app"
version = "0.1.0"
edition = "2024"
publish = false

[[bin]]
name = "billing-worker"
path = "src/bin/worker.rs"

[[bin]]
name = "billing-canary"
path = "src/bin/canary.rs"

[dependencies]
# cronverb under another name, as `crate = "cv"` allows.
cv = { package = "cronverb", path = "ROOT" }
tokio = { version = "1", features = ["rt", "macros"] }

# Not a member of cronverb's workspace.
[workspace]
"#;

const LIB: &str = r#"/// Sends the nightly invoices.
#[cv::cron("0 2 * * *", crate = "cv")]
pub async fn send_invoices() {}

/// Builds the runtime as a replica does, without `.module()`, and prints its module, then the name of
/// each of its jobs, one a line.
pub async fn print_module() {
    let runtime = cv::Runtime::builder().build().await.expect("builds");
    println!("{}", runtime.module());
    for job in cv::jobs() {
        println!("{}", job.name);
    }
}
"#;

const MAIN: &str = r#"#[tokio::main(flavor = "current_thread")]
async fn main() {
    billing_app::print_module().await;
}
"#;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Writes the package (only the files that differ, so that cargo rebuilds only what changed) and builds
/// it with this workspace's lock file, offline.
fn build_package() -> (PathBuf, PathBuf) {
    let fixtures = root().join("target").join("cronverb-fixtures");
    let dir = fixtures.join("billing-app");
    let manifest = MANIFEST.replace("ROOT", root().to_str().unwrap());
    let lock = std::fs::read_to_string(root().join("Cargo.lock")).unwrap();
    for (path, text) in [
        ("Cargo.toml", manifest.as_str()),
        ("Cargo.lock", lock.as_str()),
        ("src/lib.rs", LIB),
        ("src/bin/worker.rs", MAIN),
        ("src/bin/canary.rs", MAIN),
    ] {
        let path = dir.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        if std::fs::read_to_string(&path).ok().as_deref() != Some(text) {
            std::fs::write(&path, text).unwrap();
        }
    }
    let target = fixtures.join("target");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let output = Command::new(cargo)
        .args(["build", "--offline", "--bins", "--manifest-path"])
        .arg(dir.join("Cargo.toml"))
        .env("CARGO_TARGET_DIR", &target)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    (dir, target.join("debug"))
}

fn stdout(output: &Output) -> &str {
    std::str::from_utf8(&output.stdout).unwrap()
}

fn stderr(output: &Output) -> &str {
    std::str::from_utf8(&output.stderr).unwrap()
}

/// What the program at `path` prints: its module, and the names of its jobs.
fn module_and_jobs_of(path: &Path) -> (String, Vec<String>) {
    let output = Command::new(path).output().unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let mut lines = stdout(&output).lines().map(str::to_owned);
    (lines.next().unwrap_or_default(), lines.collect())
}

#[test]
fn every_binary_of_a_package_registers_the_module_schema_extract_gives() {
    let (package, bins) = build_package();

    let (worker, jobs) = module_and_jobs_of(&bins.join("billing-worker"));
    let (canary, _) = module_and_jobs_of(&bins.join("billing-canary"));
    // The same program renamed at deploy.
    let renamed = bins.join("billing-worker-v2");
    std::fs::copy(bins.join("billing-worker"), &renamed).unwrap();
    let (renamed, _) = module_and_jobs_of(&renamed);

    let output = Command::new(env!("CARGO_BIN_EXE_cronverb"))
        .args(["schema", "extract", "--format", "json", "--manifest-path"])
        .arg(package.join("Cargo.toml"))
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let schema: serde_json::Value = serde_json::from_str(stdout(&output)).unwrap();
    let extracted: Vec<&str> = schema["modules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|module| module["name"].as_str().unwrap())
        .collect();

    assert_eq!(
        [worker.as_str(), canary.as_str(), renamed.as_str()],
        ["billing_app"; 3],
        "the modules of billing-worker, billing-canary and billing-worker-v2"
    );
    assert_eq!(
        extracted,
        ["billing_app"],
        "the modules `schema extract` gives"
    );

    assert_eq!(
        jobs,
        ["billing_app::send_invoices"],
        "the jobs billing-worker registers, with cronverb renamed `cv`"
    );
    let extracted_verbs: Vec<&str> = schema["modules"][0]["verbs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|verb| verb["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        extracted_verbs,
        ["billing_app::send_invoices"],
        "the verbs `schema extract` gives for `#[cv::cron(…, crate = \"cv\")]`"
    );
}
