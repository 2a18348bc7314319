//! The code `#[cron]` generates: the user's function, unchanged, and beside it a registration submitted to
//! `inventory`, inside `const _: () = { … };` and naming only `::cronverb::__private::…`.

use cron_schema::MissedPolicy;
use proc_macro2::TokenStream;
use quote::{ToTokens, quote, quote_spanned};
use syn::ext::IdentExt;
use syn::spanned::Spanned;
use syn::{Attribute, Expr, ExprLit, ItemFn, Lit, Meta, ReturnType};

use crate::attr::{self, Args};
use crate::errors::Errors;
use crate::valid;

pub fn cron(args: TokenStream, item: TokenStream) -> TokenStream {
    let mut errors = Errors::default();
    let args = attr::parse(args, &mut errors);
    let function = valid::function(item.clone(), &mut errors);
    if let Some(error) = errors.finish() {
        // The function as written, so that one mistake gives one message and IDEs keep working.
        let error = error.to_compile_error();
        return quote!(#item #error);
    }
    match (args, function) {
        (Some(args), Some(function)) => registration(&args, &function),
        _ => item,
    }
}

fn registration(args: &Args, function: &ItemFn) -> TokenStream {
    let ident = &function.sig.ident;
    let name = match &args.name {
        Some(name) => name.to_token_stream(),
        None => {
            let ident = ident.unraw().to_string();
            quote!(::core::concat!(::core::module_path!(), "::", #ident))
        }
    };
    let expression = &args.expression;
    let timezone = optional(args.timezone);
    let timeout = optional(args.timeout.as_ref());
    let missed = match args.missed {
        MissedPolicy::Once => quote!(::cronverb::__private::MissedPolicy::Once),
        MissedPolicy::Skip => quote!(::cronverb::__private::MissedPolicy::Skip),
    };
    // `line!()` spanned on the function's name gives the function's line, not the attribute's.
    let line = quote_spanned!(ident.span()=> ::core::line!());
    let doc = doc(&function.attrs);

    // A return type that is not `()` or `Result<(), E: Display>` fails this bound, spanned on the type.
    let output_span = match &function.sig.output {
        ReturnType::Default => ident.span(),
        ReturnType::Type(_, ty) => ty.span(),
    };
    let outcome = quote_spanned! {output_span=>
        ::cronverb::__private::IntoOutcome::into_outcome(__cronverb_output)
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
            fn __cronverb_handler() -> ::cronverb::__private::HandlerFuture {
                #handler
            }

            ::cronverb::__private::inventory::submit! {
                ::cronverb::__private::Registration {
                    name: #name,
                    module_path: ::core::module_path!(),
                    expression: #expression,
                    timezone: #timezone,
                    timeout: #timeout,
                    missed: #missed,
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

/// The doc comment: its lines joined with `\n`, each trimmed of one leading space. A `#[doc = …]` whose
/// value is not a literal (`include_str!(…)`) is kept as an expression inside `concat!`.
fn doc(attrs: &[Attribute]) -> TokenStream {
    let lines: Vec<&Expr> = attrs
        .iter()
        .filter_map(|attr| match &attr.meta {
            Meta::NameValue(meta) if meta.path.is_ident("doc") => Some(&meta.value),
            _ => None,
        })
        .collect();
    let text = |expr: &Expr| match expr {
        Expr::Lit(ExprLit {
            lit: Lit::Str(lit), ..
        }) => {
            let text = lit.value();
            Some(text.strip_prefix(' ').map(str::to_owned).unwrap_or(text))
        }
        _ => None,
    };
    if let Some(texts) = lines
        .iter()
        .map(|line| text(line))
        .collect::<Option<Vec<_>>>()
    {
        let joined = texts.join("\n");
        return quote!(#joined);
    }
    let mut parts = Vec::new();
    for (index, line) in lines.iter().enumerate() {
        if index > 0 {
            parts.push(quote!("\n"));
        }
        parts.push(match text(line) {
            Some(text) => text.into_token_stream(),
            None => line.to_token_stream(),
        });
    }
    quote!(::core::concat!(#(#parts),*))
}
