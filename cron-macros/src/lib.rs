//! The `#[cron]` attribute of cronverb. Use it through the `cronverb` crate.

use proc_macro::TokenStream;

/// Declares a scheduled handler. See the `cronverb` crate.
#[proc_macro_attribute]
pub fn cron(args: TokenStream, item: TokenStream) -> TokenStream {
    let _ = args;
    item
}
