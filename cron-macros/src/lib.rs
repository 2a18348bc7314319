//! The `#[cron]` attribute of cronverb. Use it through the `cronverb` crate.
//!
//! The attribute parses its arguments (`attr`), checks the function it is on (`valid`) and generates an
//! `inventory` registration (`expand`). Every value is validated through `cron-schema`, the same code the
//! runtime uses, so a schedule that compiles is a schedule that runs.

mod attr;
mod errors;
mod expand;
mod valid;

use proc_macro::TokenStream;

/// Declares a scheduled handler. See the `cronverb` crate.
#[proc_macro_attribute]
pub fn cron(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::cron(args.into(), item.into()).into()
}
