//! The metrics of docs/metrics.md in a real Prometheus: the alert rules shipped in docs/prometheus/ pass
//! their `promtool` tests, and a Prometheus server that scrapes a replica's exporter stores series that
//! those rules select, in the shape the `promtool` tests give them.
//!
//! Needs Debian's `prometheus` package (`prometheus` and `promtool`; scripts/install-prometheus installs
//! it), or `PROMETHEUS` and `PROMTOOL` naming the binaries; without them the tests fail saying so.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

const INSTALL: &str = "scripts/install-prometheus (Debian's `prometheus` package)";

fn rules_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/prometheus")
}

/// The binary `name`, or the one `$variable` names.
fn binary(variable: &str, name: &str) -> PathBuf {
    if let Some(path) = std::env::var_os(variable) {
        return PathBuf::from(path);
    }
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(name))
            .find(|path| path.is_file())
    });
    found.unwrap_or_else(|| {
        panic!("`{name}` is not installed (nor ${variable} set); install it with {INSTALL}")
    })
}

/// Runs `promtool` with `args` in docs/prometheus/; fails the test with its output unless it succeeds.
fn promtool(args: &[&str]) {
    let output = Command::new(binary("PROMTOOL", "promtool"))
        .args(args)
        .current_dir(rules_dir())
        .output()
        .expect("running promtool");
    assert!(
        output.status.success(),
        "promtool {args:?} failed:\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn the_shipped_rules_pass_their_promtool_tests() {
    promtool(&["check", "rules", "cronverb-rules.yml"]);
    promtool(&["test", "rules", "cronverb-rules.test.yml"]);
}

/// A port nobody listens on now.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("binding a free port")
        .port()
}

/// A Prometheus server, killed when dropped.
struct Prometheus {
    child: Child,
    port: u16,
    dir: PathBuf,
    log: PathBuf,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Prometheus {
    /// Starts one that scrapes `target` every second and evaluates the shipped rules every second.
    fn start(target: &str) -> Prometheus {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
            "prometheus-{}-{}",
            std::process::id(),
            free_port()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let config = dir.join("prometheus.yml");
        let rules = rules_dir().join("cronverb-rules.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
                 rule_files:\n  - {rules:?}\n\
                 scrape_configs:\n  - job_name: shop\n    static_configs:\n      - targets: [{target:?}]\n"
            ),
        )
        .unwrap();
        let port = free_port();
        let log = dir.join("prometheus.log");
        let child = Command::new(binary("PROMETHEUS", "prometheus"))
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("starting prometheus");
        Prometheus {
            child,
            port,
            dir,
            log,
        }
    }

    /// `GET path` of its HTTP API, as JSON; `None` while it does not answer.
    fn get(&self, path: &str) -> Option<Value> {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).ok()?;
        stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
        write!(stream, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
        let mut response = String::new();
        stream.read_to_string(&mut response).ok()?;
        let (head, body) = response.split_once("\r\n\r\n")?;
        if !head.starts_with("HTTP/1.0 200") && !head.starts_with("HTTP/1.1 200") {
            return None;
        }
        serde_json::from_str(body).ok()
    }

    /// The series of the instant query `expr`, each as its labels.
    fn query(&self, expr: &str) -> Vec<BTreeMap<String, String>> {
        let Some(answer) = self.get(&format!("/api/v1/query?query={}", encode(expr))) else {
            return Vec::new();
        };
        labels_of(&answer["data"]["result"], "metric")
    }

    /// The label sets of the series stored whose name matches `name_regex`.
    fn series(&self, name_regex: &str) -> Vec<BTreeMap<String, String>> {
        let selector = format!("{{__name__=~\"{name_regex}\"}}");
        let Some(answer) = self.get(&format!("/api/v1/series?match[]={}", encode(&selector)))
        else {
            return Vec::new();
        };
        labels_of(&answer["data"], "")
    }

    /// Waits up to 60 s for `expr` to select a series whose labels include `labels`; returns the
    /// series it selected then.
    fn wait_for(&self, expr: &str, labels: &[(&str, &str)]) -> Vec<BTreeMap<String, String>> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let result = self.query(expr);
            let matches = |series: &BTreeMap<String, String>| {
                labels
                    .iter()
                    .all(|(key, value)| series.get(*key).map(String::as_str) == Some(*value))
            };
            if result.iter().any(matches) {
                return result;
            }
            assert!(
                Instant::now() < deadline,
                "after 60 s, `{expr}` selects no series with {labels:?}: {result:?}\nprometheus' log:\n{}",
                std::fs::read_to_string(&self.log).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

/// The label sets in `values` (each under `key`, or each itself when `key` is empty).
fn labels_of(values: &Value, key: &str) -> Vec<BTreeMap<String, String>> {
    let Some(values) = values.as_array() else {
        return Vec::new();
    };
    values
        .iter()
        .filter_map(|value| {
            let labels = if key.is_empty() { value } else { &value[key] };
            labels.as_object().map(|labels| {
                labels
                    .iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
                    .collect()
            })
        })
        .collect()
}

/// `text` percent-encoded for a query string.
fn encode(text: &str) -> String {
    text.bytes()
        .map(|byte| match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (byte as char).to_string()
            }
            _ => format!("%{byte:02X}"),
        })
        .collect()
}

/// The series of the `promtool` test file's `input_series`: each metric's name and its label names.
fn test_file_shapes() -> BTreeSet<(String, BTreeSet<String>)> {
    let text = std::fs::read_to_string(rules_dir().join("cronverb-rules.test.yml")).unwrap();
    text.lines()
        .filter_map(|line| line.trim().strip_prefix("- series: '"))
        .map(|series| {
            let (name, labels) = series.split_once('{').expect("a series with labels");
            let names = labels
                .split(", ")
                .map(|label| label.split_once('=').expect("name=\"value\"").0.to_owned())
                .collect();
            (name.to_owned(), names)
        })
        .collect()
}

/// A replica of module `shop` with an exporter as docs/metrics.md installs it, scraped by a real
/// Prometheus that loads docs/prometheus/cronverb-rules.yml: the job label stays Prometheus' own, the
/// rules' series come out by `module` and `verb` (a job that only fails included), the skip alert goes
/// pending, and every series the `promtool` tests feed the rules has the shape Prometheus stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_scraping_a_replica_stores_what_the_rules_select() {
    // Fails at once, before starting anything, when it is missing.
    binary("PROMETHEUS", "prometheus");
    // A free port can be taken between choosing it and listening on it ("Address already in use",
    // seen once in a full run): choose another. A failed listener installs no recorder.
    let exporter = (0..5)
        .find_map(|_| {
            let exporter = format!("127.0.0.1:{}", free_port());
            metrics_exporter_prometheus::PrometheusBuilder::new()
                .set_buckets(&[0.005, 0.05, 0.25, 1.0, 5.0])
                .unwrap()
                .with_http_listener(exporter.parse::<std::net::SocketAddr>().unwrap())
                .install()
                .ok()
                .map(|()| exporter)
        })
        .expect("the exporter listens on a free port");
    let runtime = cronverb::Runtime::builder()
        .module("shop")
        .registered_jobs(false)
        .job("shop::ok", "* * * * * *", || async {})
        .job("shop::fails", "* * * * * *", || async {
            Err::<(), _>(std::io::Error::other("the upstream service answered 503"))
        })
        // Due every second, runs 2.5 s: skips the occurrences it overlaps.
        .job("shop::slow", "* * * * * *", || async {
            tokio::time::sleep(Duration::from_millis(2_500)).await;
        })
        .build()
        .await
        .unwrap();
    let handle = runtime.start();
    let prometheus = Prometheus::start(&exporter);

    let checked = tokio::task::spawn_blocking(move || {
        // Prometheus' `job` is the scrape's; the replica's job is in `module` and `verb`.
        let runs = prometheus.wait_for(
            "cron_runs_total",
            &[("job", "shop"), ("module", "shop"), ("verb", "shop::ok")],
        );
        assert!(
            runs.iter()
                .all(|series| !series.contains_key("exported_job")),
            "{runs:?}"
        );
        // The rules' own series: a job that never succeeded counts from its registration.
        for verb in ["shop::ok", "shop::fails", "shop::slow"] {
            prometheus.wait_for(
                "cronverb:job_seconds_since_success >= 0",
                &[("module", "shop"), ("verb", verb)],
            );
        }
        assert_eq!(
            prometheus.query("cron_job_last_success_timestamp_seconds{verb=\"shop::fails\"}"),
            Vec::new(),
            "`shop::fails` never succeeds: it is in the rule's series through its registration"
        );
        prometheus.wait_for(
            "ALERTS{alertname=\"CronRunsSkipped\"}",
            &[
                ("alertstate", "pending"),
                ("module", "shop"),
                ("verb", "shop::slow"),
                ("reason", "overlap"),
            ],
        );
        // What the promtool tests feed the rules is what Prometheus stored, label for label (the
        // scrape's `instance` and `job` included).
        let stored: BTreeSet<(String, BTreeSet<String>)> = prometheus
            .series("cron_.*")
            .into_iter()
            .map(|mut labels| {
                let name = labels.remove("__name__").unwrap_or_default();
                (name, labels.into_keys().collect())
            })
            .collect();
        for shape in test_file_shapes() {
            assert!(
                stored.contains(&shape),
                "the promtool tests feed {shape:?}, which Prometheus never stored: {stored:#?}"
            );
        }
    })
    .await;
    handle.shutdown().await.unwrap();
    checked.unwrap();
}
