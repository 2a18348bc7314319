//! Headless Chromium driven over WebDriver, for the dashboard's browser test: chromedriver on a free port
//! in a process group of its own, one session with a fresh profile, screenshots under
//! `target/dashboard-screenshots/`. Dropping a [`Browser`] kills chromedriver and every Chromium process
//! it started, also when the test panics.
//!
//! The binaries are Debian's `chromium` and `chromium-driver` (scripts/install-browser installs them);
//! `CHROMEDRIVER` and `CHROMIUM` name others.

use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use fantoccini::{Client, ClientBuilder};
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::json;

/// The command that installs what this module drives, for the messages that say it is missing.
pub const INSTALL: &str = "scripts/install-browser \
    (as root: apt-get install -y --no-install-recommends chromium chromium-driver)";

/// Chromium's flags: headless, no sandbox (tests run as root in containers), and nothing that talks to
/// anything but the pages the test opens: no sync, no component updates, no background requests, and
/// every host name but the loopback's resolved to nothing.
const FLAGS: &[&str] = &[
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost, EXCLUDE 127.0.0.1",
    "--window-size=1280,900",
];

/// How long chromedriver may take to listen.
const DRIVER_START: Duration = Duration::from_secs(20);

/// A headless Chromium session; `client` drives it.
#[derive(Debug)]
pub struct Browser {
    pub client: Client,
    // Dropped after the client: kills what is left of the processes and removes the profile.
    _driver: Driver,
}

/// chromedriver, the Chromium it started (same process group) and the session's profile directory.
#[derive(Debug)]
struct Driver {
    child: Child,
    profile: PathBuf,
}

impl Drop for Driver {
    fn drop(&mut self) {
        // The whole group: chromedriver and the browser processes. A `kill(2)` of a process group needs
        // libc and `unsafe`; kill(1) does it.
        let group = format!("-{}", self.child.id());
        let _ = Command::new("kill")
            .args(["-KILL", "--", &group])
            .stderr(Stdio::null())
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.profile);
    }
}

impl Browser {
    /// Starts chromedriver on a free port and opens a session of headless Chromium with a fresh profile.
    pub async fn start() -> anyhow::Result<Browser> {
        let chromedriver = binary("CHROMEDRIVER", "chromedriver")?;
        let chromium = binary("CHROMIUM", "chromium")?;
        let port = free_port()?;
        let profile =
            std::env::temp_dir().join(format!("cronverb-chromium-{}-{port}", std::process::id()));
        let _ = std::fs::remove_dir_all(&profile);
        std::fs::create_dir_all(&profile)?;
        let log = profile.join("chromedriver.log");
        let child = Command::new(&chromedriver)
            .arg(format!("--port={port}"))
            .arg(format!("--log-path={}", log.display()))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            // A process group of its own, which the browser processes it starts stay in.
            .process_group(0)
            .spawn()
            .with_context(|| format!("starting {}", chromedriver.display()))?;
        let driver = Driver {
            child,
            profile: profile.clone(),
        };
        let address = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
        let deadline = Instant::now() + DRIVER_START;
        while TcpStream::connect(address).is_err() {
            if Instant::now() >= deadline {
                bail!(
                    "chromedriver did not listen on {address} within {DRIVER_START:?}; its log:\n{}",
                    tail(&log)
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }

        let mut args: Vec<String> = FLAGS.iter().map(|f| (*f).to_owned()).collect();
        args.push(format!(
            "--user-data-dir={}",
            profile.join("chromium").display()
        ));
        let capabilities = json!({
            "browserName": "chrome",
            "goog:chromeOptions": { "binary": chromium, "args": args },
        });
        let serde_json::Value::Object(capabilities) = capabilities else {
            unreachable!("an object literal")
        };
        let client = ClientBuilder::new(HttpConnector::new())
            .capabilities(capabilities)
            .connect(&format!("http://{address}"))
            .await
            .with_context(|| {
                format!(
                    "opening a Chromium session; chromedriver's log:\n{}",
                    tail(&log)
                )
            })?;
        Ok(Browser {
            client,
            _driver: driver,
        })
    }

    /// Saves a screenshot of the viewport as `target/dashboard-screenshots/<name>.png`; returns its path.
    pub async fn screenshot(&self, name: &str) -> anyhow::Result<PathBuf> {
        let png = self.client.screenshot().await?;
        let dir = screenshot_dir();
        std::fs::create_dir_all(&dir)?;
        let path = dir.join(format!("{name}.png"));
        std::fs::write(&path, png)?;
        Ok(path)
    }

    /// Ends the session (Chromium exits), then drops chromedriver.
    pub async fn close(self) -> anyhow::Result<()> {
        let Browser { client, _driver } = self;
        client.close().await?;
        Ok(())
    }
}

/// `target/dashboard-screenshots/` of this workspace (or of `CARGO_TARGET_DIR`).
pub fn screenshot_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("target"),
        PathBuf::from,
    );
    target.join("dashboard-screenshots")
}

/// The binary named by `$variable`, else `name` on `PATH`; an error that says how to install it.
fn binary(variable: &str, name: &str) -> anyhow::Result<PathBuf> {
    if let Some(path) = std::env::var_os(variable).filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(path));
    }
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join(name))
        .find(|path| path.is_file())
        .with_context(|| {
            format!("`{name}` is not installed (nor ${variable} set); install it with {INSTALL}")
        })
}

/// A port nothing listens on now.
fn free_port() -> anyhow::Result<u16> {
    Ok(TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?
        .local_addr()?
        .port())
}

/// The last lines of a log file, for an error message.
fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}
