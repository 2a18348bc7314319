//! Panics in handlers: recorded as the run's outcome (`panicked`, with the message and where it was
//! raised) and logged once through `tracing`, not printed a second time by the process's panic hook
//! (docs/runtime.md, "Failures"). Rust's default hook prints every panic to stderr, with a backtrace
//! under `RUST_BACKTRACE`: for a handler whose panic is caught, recorded and logged, that is noise in
//! every replica's output.
//!
//! The runtime wraps the hook the process has when it starts (once per process): a panic raised while a
//! handler is being called or polled on this thread goes to the wrapped hook only if the application
//! asked for it ([`RuntimeBuilder::print_handler_panics`]); any other panic always does. An
//! application that installs its own hook after the runtime started replaces the wrapper.
//!
//! [`RuntimeBuilder::print_handler_panics`]: crate::RuntimeBuilder::print_handler_panics

use std::cell::{Cell, RefCell};
use std::sync::Once;
use std::sync::atomic::{AtomicBool, Ordering};

thread_local! {
    /// Set while a handler is being called or polled on this thread.
    static IN_HANDLER: Cell<bool> = const { Cell::new(false) };
    /// Where the last handler panic on this thread was raised.
    static LOCATION: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Whether handler panics reach the wrapped hook too.
static PRINT: AtomicBool = AtomicBool::new(false);

static INSTALL: Once = Once::new();

/// Wraps the process's panic hook, once: handler panics reach it only when `print` is set.
pub(crate) fn quiet_handler_panics(print: bool) {
    PRINT.store(print, Ordering::Relaxed);
    INSTALL.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if IN_HANDLER.with(Cell::get) {
                let location = info.location().map(|l| l.to_string());
                LOCATION.with(|cell| *cell.borrow_mut() = location);
                if !PRINT.load(Ordering::Relaxed) {
                    return;
                }
            }
            previous(info);
        }));
    });
}

/// Runs `call` (calling or polling a handler) marked as handler code, for the hook.
pub(crate) fn in_handler<T>(call: impl FnOnce() -> T) -> T {
    struct Reset(bool);
    impl Drop for Reset {
        fn drop(&mut self) {
            IN_HANDLER.with(|flag| flag.set(self.0));
        }
    }
    let _reset = Reset(IN_HANDLER.with(|flag| flag.replace(true)));
    call()
}

/// Where the last handler panic on this thread was raised, taken.
pub(crate) fn take_location() -> Option<String> {
    LOCATION.with(|cell| cell.borrow_mut().take())
}
