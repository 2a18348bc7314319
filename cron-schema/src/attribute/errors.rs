//! Every error of one `#[cron]`, collected so that they are all reported at once.

use std::fmt::Display;

use proc_macro2::Span;
use quote::ToTokens;

/// Collects every error of one attribute.
#[derive(Default)]
pub(super) struct Errors {
    combined: Option<syn::Error>,
    count: usize,
}

impl Errors {
    pub(super) fn push(&mut self, error: syn::Error) {
        self.count += 1;
        match &mut self.combined {
            Some(combined) => combined.combine(error),
            None => self.combined = Some(error),
        }
    }

    pub(super) fn at(&mut self, span: Span, message: impl Display) {
        self.push(syn::Error::new(span, message));
    }

    pub(super) fn spanned(&mut self, tokens: impl ToTokens, message: impl Display) {
        self.push(syn::Error::new_spanned(tokens, message));
    }

    /// How many errors were pushed so far.
    pub(super) fn len(&self) -> usize {
        self.count
    }

    pub(super) fn finish(self) -> Option<syn::Error> {
        self.combined
    }
}
