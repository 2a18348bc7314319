//! What several of cron-runtime's integration tests need: the log lines a test caused, and the schema a
//! build of some jobs registers.
// Each test binary uses a part of it.
#![allow(dead_code)]

use std::sync::{Arc, Mutex};

use chrono_tz::Tz;
use cron_runtime::store::JobSpec;
use cron_schema::{Cron, Schema, Verb, format_duration};

/// The log lines written on this thread while it is alive, at `level` and above. `#[sqlx::test]` and
/// `#[tokio::test]` run a current-thread runtime, so the store's and the pool's tasks log here too.
pub struct Logs {
    buffer: Arc<Mutex<Vec<u8>>>,
    _guard: tracing::subscriber::DefaultGuard,
}

impl Logs {
    pub fn capture(level: tracing::Level) -> Logs {
        let buffer = Arc::new(Mutex::new(Vec::new()));
        let writer = Arc::clone(&buffer);
        let subscriber = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_max_level(level)
            .with_writer(move || LogWriter(Arc::clone(&writer)))
            .finish();
        Logs {
            buffer,
            _guard: tracing::subscriber::set_default(subscriber),
        }
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.buffer.lock().unwrap()).into_owned()
    }
}

struct LogWriter(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for LogWriter {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The schema a build of `jobs` registers, as `RuntimeBuilder::build` writes it.
pub fn schema_of(module: &str, jobs: &[JobSpec]) -> String {
    let schema = Schema::new(jobs.iter().map(|job| {
        let mut cron = Cron::new(job.expression.as_str())
            .timeout(format_duration(job.timeout))
            .missed(job.missed);
        if job.zone != Tz::UTC {
            cron = cron.timezone(job.zone.name());
        }
        (module, Verb::new(job.verb.as_str(), cron))
    }));
    serde_json::to_string(&schema).unwrap()
}
