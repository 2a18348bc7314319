//! The `#[cron]` attribute of cronverb. Use it through the `cronverb` crate.
//!
//! The attribute's arguments and the function it is on are parsed and validated by
//! `cron_schema::attribute`, the code `cronverb schema extract` runs on source files too, with the grammar
//! the runtime uses: a schedule that compiles is a schedule that runs, and extraction accepts exactly what
//! compiles. This crate only generates the `inventory` registration (`expand`).

mod expand;

use proc_macro::TokenStream;

/// Declares a scheduled handler. See the `cronverb` crate.
#[proc_macro_attribute]
pub fn cron(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::cron(args.into(), item.into()).into()
}
