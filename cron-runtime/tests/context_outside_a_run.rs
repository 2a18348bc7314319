//! `context()` outside a run panics at the caller's line, not the library's: the panic says where the
//! misplaced call is. Alone in its test binary, because it replaces the process's panic hook.

use std::panic;
use std::sync::{Arc, Mutex};

#[test]
fn context_outside_a_run_panics_at_the_callers_line() {
    let seen: Arc<Mutex<Option<(String, u32, String)>>> = Arc::default();
    let hook_seen = Arc::clone(&seen);
    panic::set_hook(Box::new(move |info| {
        let location = info.location().expect("a panic has a location");
        let message = info
            .payload()
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| {
                info.payload()
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_owned())
            })
            .unwrap_or_default();
        *hook_seen.lock().unwrap() = Some((location.file().to_owned(), location.line(), message));
    }));
    let line = line!() + 1;
    let result = panic::catch_unwind(|| cron_runtime::context());
    let _ = panic::take_hook();

    assert!(result.is_err(), "no run, no context");
    let (file, panicked_at, message) = seen
        .lock()
        .unwrap()
        .clone()
        .expect("the hook saw the panic");
    assert_eq!((file.as_str(), panicked_at), (file!(), line), "{message}");
    assert!(
        message.contains("`cronverb::context()` called outside a job handler"),
        "{message}"
    );
}
