//! The shape of the function `#[cron]` is on: a free `async fn` with no parameters and no generics.
//!
//! The return type is checked by the compiler, through the `cronverb::IntoOutcome` bound the generated code
//! puts on it.

use proc_macro2::TokenStream;
use quote::{ToTokens, quote};
use syn::{FnArg, Item, ItemFn};

use super::errors::Errors;

/// Parses the item and checks its signature, pushing every problem to `errors`. Returns the function
/// whenever the item is one, even a wrong one, so that the caller can keep it.
pub(super) fn function(item: TokenStream, errors: &mut Errors) -> Option<ItemFn> {
    let item: Item = match syn::parse2(item) {
        Ok(item) => item,
        Err(error) => {
            errors.push(error);
            return None;
        }
    };
    let Item::Fn(function) = item else {
        errors.spanned(head(&item), "`#[cron]` goes on an `async fn`");
        return None;
    };

    let sig = &function.sig;
    if let Some(token) = &sig.constness {
        errors.spanned(token, "`#[cron]` functions cannot be `const`");
    }
    if sig.asyncness.is_none() {
        errors.spanned(
            sig.fn_token,
            "the `async` keyword is missing from the function declaration",
        );
    }
    if let Some(token) = &sig.unsafety {
        errors.spanned(
            token,
            "`#[cron]` functions cannot be `unsafe`; the scheduler calls them with no way to uphold a safety contract",
        );
    }
    if let Some(abi) = &sig.abi {
        errors.spanned(abi, "`#[cron]` functions cannot be `extern`");
    }
    if !sig.generics.params.is_empty() {
        errors.spanned(
            &sig.generics,
            "`#[cron]` functions cannot be generic; the scheduler calls them with no type arguments",
        );
    }
    if let Some(clause) = &sig.generics.where_clause {
        errors.spanned(clause, "`#[cron]` functions cannot have a `where` clause");
    }

    let mut parameters = Vec::new();
    for input in &sig.inputs {
        match input {
            FnArg::Receiver(receiver) => errors.spanned(
                receiver,
                "`#[cron]` goes on a free function, not a method; move it out of the `impl` block",
            ),
            FnArg::Typed(parameter) => parameters.push(parameter),
        }
    }
    if let Some(variadic) = &sig.variadic {
        parameters.clear();
        errors.spanned(
            variadic,
            "`#[cron]` functions take no parameters; reach application state with `cronverb::context().state::<T>()`",
        );
    }
    if !parameters.is_empty() {
        errors.spanned(
            quote!(#(#parameters),*),
            "`#[cron]` functions take no parameters; reach application state with `cronverb::context().state::<T>()`",
        );
    }

    Some(function)
}

/// What to underline when the attribute is on something other than a function: the item's keyword and
/// name, not its whole body.
fn head(item: &Item) -> TokenStream {
    fn pair(keyword: impl ToTokens, name: impl ToTokens) -> TokenStream {
        quote!(#keyword #name)
    }
    match item {
        Item::Struct(item) => pair(item.struct_token, &item.ident),
        Item::Enum(item) => pair(item.enum_token, &item.ident),
        Item::Union(item) => pair(item.union_token, &item.ident),
        Item::Trait(item) => pair(item.trait_token, &item.ident),
        Item::Mod(item) => pair(item.mod_token, &item.ident),
        Item::Const(item) => pair(item.const_token, &item.ident),
        Item::Static(item) => pair(item.static_token, &item.ident),
        Item::Type(item) => pair(item.type_token, &item.ident),
        Item::Impl(item) => pair(item.impl_token, &item.self_ty),
        _ => item.to_token_stream(),
    }
}
