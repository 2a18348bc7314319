//! The code `#[cron]` generates: the user's function, unchanged, and beside it a registration submitted to
//! `inventory`, inside `const _: () = { … };` and naming only `<cronverb>::__private::…`, where
//! `<cronverb>` is `::cronverb` or the path given as `crate = "…"` (for a renamed dependency or a
//! re-export).

use cron_schema::attribute::{self, CronAttribute, DocLine};
use cron_schema::{MissedPolicy, RunOn};
use proc_macro2::TokenStream;
use quote::{ToTokens, quote, quote_spanned};
use syn::ReturnType;
use syn::ext::IdentExt;
use syn::spanned::Spanned;

pub fn cron(args: TokenStream, item: TokenStream) -> TokenStream {
    match attribute::parse(args, item.clone()) {
        Ok(cron) => registration(&cron),
        Err(error) => {
            // The function as written, so that one mistake gives one message and IDEs keep working.
            let error = error.to_compile_error();
            quote!(#item #error)
        }
    }
}

fn registration(args: &CronAttribute) -> TokenStream {
    let function = &args.function;
    let ident = &function.sig.ident;
    let name = match &args.name {
        Some(name) => name.to_token_stream(),
        None => {
            let ident = ident.unraw().to_string();
            quote!(::core::concat!(::core::module_path!(), "::", #ident))
        }
    };
    // Every path into cronverb goes through one import of `__private`, so that a `crate = "…"` that does
    // not resolve is one error, on its literal (where the path's tokens are spanned).
    let cronverb = match &args.crate_path {
        Some(path) => path.to_token_stream(),
        None => quote!(::cronverb),
    };
    let expression = &args.expression;
    let timezone = optional(args.timezone);
    let timeout = optional(args.timeout.as_ref());
    let missed = match args.missed {
        MissedPolicy::Once => quote!(__cronverb_private::MissedPolicy::Once),
        MissedPolicy::Skip => quote!(__cronverb_private::MissedPolicy::Skip),
        MissedPolicy::All => quote!(__cronverb_private::MissedPolicy::All),
    };
    let catch_up = optional(args.catch_up.as_ref());
    let jitter = optional(args.jitter.as_ref());
    let expect_within = optional(args.expect_within.as_ref());
    let fixed = args.fixed;
    let retries = args.retries;
    let backoff = optional(args.backoff.as_ref());
    let lease = optional(args.lease.as_ref());
    let on = match args.on {
        RunOn::OneReplica => quote!(__cronverb_private::RunOn::OneReplica),
        RunOn::EveryReplica => quote!(__cronverb_private::RunOn::EveryReplica),
    };
    // `line!()` spanned on the function's name gives the function's line, not the attribute's.
    let line = quote_spanned!(ident.span()=> ::core::line!());
    let doc = doc(&args.doc());

    // A return type that is not `()` or `Result<(), E: Display>` fails this bound, spanned on the type. The
    // compiler names the trait by its public path, `cronverb::IntoOutcome`, whose documentation lists the
    // return types a job can have.
    let output_span = match &function.sig.output {
        ReturnType::Default => ident.span(),
        ReturnType::Type(_, ty) => ty.span(),
    };
    let outcome = quote_spanned! {output_span=>
        __cronverb_private::IntoOutcome::into_outcome(__cronverb_output)
    };
    // A future that is not `Send` fails here, spanned on the function's name.
    let handler = quote_spanned! {ident.span()=>
        ::std::boxed::Box::pin(async move {
            let __cronverb_output = #ident().await;
            #outcome
        })
    };

    quote! {
        #function

        const _: () = {
            use #cronverb::__private as __cronverb_private;

            fn __cronverb_handler() -> __cronverb_private::HandlerFuture {
                #handler
            }

            __cronverb_private::inventory::submit! {
                __cronverb_private::Registration {
                    name: #name,
                    module_path: ::core::module_path!(),
                    expression: #expression,
                    timezone: #timezone,
                    timeout: #timeout,
                    missed: #missed,
                    retries: #retries,
                    backoff: #backoff,
                    lease: #lease,
                    on: #on,
                    catch_up: #catch_up,
                    jitter: #jitter,
                    expect_within: #expect_within,
                    fixed: #fixed,
                    file: ::core::file!(),
                    line: #line,
                    doc: #doc,
                    handler: __cronverb_handler,
                }
            }
        };
    }
}

fn optional(value: Option<impl ToTokens>) -> TokenStream {
    match value {
        Some(value) => quote!(::core::option::Option::Some(#value)),
        None => quote!(::core::option::Option::None),
    }
}

/// The doc comment: its lines joined with `\n`. A `#[doc = …]` whose value is not a literal
/// (`include_str!(…)`) is kept as an expression inside `concat!`.
fn doc(lines: &[DocLine]) -> TokenStream {
    let texts: Option<Vec<&str>> = lines
        .iter()
        .map(|line| match line {
            DocLine::Text(text) => Some(text.as_str()),
            DocLine::Expr(_) => None,
        })
        .collect();
    if let Some(texts) = texts {
        let joined = texts.join("\n");
        return quote!(#joined);
    }
    let mut parts = Vec::new();
    for (index, line) in lines.iter().enumerate() {
        if index > 0 {
            parts.push(quote!("\n"));
        }
        parts.push(match line {
            DocLine::Text(text) => text.into_token_stream(),
            DocLine::Expr(expr) => expr.to_token_stream(),
        });
    }
    quote!(::core::concat!(#(#parts),*))
}
