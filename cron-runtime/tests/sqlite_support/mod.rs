//! SQLite files for tests: a fresh one per test in the system's temporary directory, deleted (with its
//! WAL and shared-memory files) when the test ends.
#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};

/// A SQLite file that does not exist yet, and its URL.
pub struct TempDb {
    pub path: PathBuf,
    pub url: String,
}

impl TempDb {
    pub fn new() -> TempDb {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let name = format!(
            "cronverb-test-{}-{}-{}.db",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        );
        let path = std::env::temp_dir().join(name);
        let url = format!("sqlite://{}", path.display());
        TempDb { path, url }
    }
}

impl Drop for TempDb {
    fn drop(&mut self) {
        for suffix in ["", "-wal", "-shm"] {
            let mut file = self.path.clone().into_os_string();
            file.push(suffix);
            let _ = std::fs::remove_file(file);
        }
    }
}
