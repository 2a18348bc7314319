//! Reading a crate's `#[cron]` functions from its `.rs` files, the way rustc finds its modules.
//!
//! From the crate's root file, `mod x;` is followed to `x.rs` or `x/mod.rs` (in the directory of the
//! parent module), `#[path = "…"]` is honoured, and inline `mod x { … }` is entered. Items and modules under
//! `#[cfg(test)]` are left out, as a normal build leaves them out; other `cfg`s are not evaluated.
//! Each `#[cron(…)]` (or `#[cronverb::cron(…)]`, or `#[cv::cron(…, crate = "cv")]` for a renamed
//! dependency) on a free function goes through `cron_schema::attribute::parse`, the function the
//! attribute itself calls.

use std::path::{Path, PathBuf};

use cron_schema::attribute::{self, CronAttribute, DocLine};
use cron_schema::{Cron, Verb};
use quote::ToTokens;
use syn::ext::IdentExt;
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{Attribute, Expr, ExprLit, Item, ItemFn, Lit, Meta, Token};

/// What was found: verbs with their module, and errors as the compiler would report them.
#[derive(Debug, Default)]
pub struct Extraction {
    pub verbs: Vec<(String, Verb)>,
    pub errors: Vec<Located>,
}

/// An error at `file:line:column` (line and column from 1; the file relative to the workspace root).
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Located {
    pub file: String,
    pub line: usize,
    pub column: usize,
    pub message: String,
}

/// Reads the crate `krate` (its name as `module_path!()` starts with it) whose root file is `root`,
/// relative to `workspace_root`.
pub fn extract_crate(workspace_root: &Path, krate: &str, root: &Path, out: &mut Extraction) {
    let mut walker = Walker {
        workspace_root,
        krate,
        out,
    };
    if let Err(message) = walker.file(root, krate, true) {
        walker.out.errors.push(Located {
            file: display(root),
            line: 1,
            column: 1,
            message,
        });
    }
}

struct Walker<'a> {
    workspace_root: &'a Path,
    krate: &'a str,
    out: &'a mut Extraction,
}

/// Where the items of one module are.
struct Scope<'s> {
    /// The file they are in.
    file: &'s Path,
    /// The directory of the file's submodules (`src/` for `src/lib.rs`, `src/a/` for `src/a.rs`), extended
    /// by the names of the inline modules entered.
    dir: PathBuf,
    /// Whether an inline module was entered: `#[path]` is then relative to `dir`, not to the file's
    /// directory.
    inline: bool,
    module_path: String,
}

impl Walker<'_> {
    /// Reads one file of module `module_path`; `Err` when it cannot be read. `mod_rs` is whether its
    /// submodules live beside it (crate roots, `mod.rs`, files named by `#[path]`).
    fn file(&mut self, file: &Path, module_path: &str, mod_rs: bool) -> Result<(), String> {
        let text = std::fs::read_to_string(self.workspace_root.join(file))
            .map_err(|error| format!("cannot read `{}`: {error}", display(file)))?;
        let ast = match syn::parse_file(&text) {
            Ok(ast) => ast,
            Err(error) => {
                self.errors(file, error, None);
                return Ok(());
            }
        };
        let parent = file.parent().unwrap_or(Path::new(""));
        let dir = match (mod_rs, file.file_stem()) {
            (false, Some(stem)) => parent.join(stem),
            _ => parent.to_owned(),
        };
        let scope = Scope {
            file,
            dir,
            inline: false,
            module_path: module_path.to_owned(),
        };
        self.items(&ast.items, &scope);
        Ok(())
    }

    fn items(&mut self, items: &[Item], scope: &Scope<'_>) {
        for item in items {
            match item {
                Item::Fn(function) if !is_cfg_test(&function.attrs) => {
                    self.function(function, scope);
                }
                Item::Mod(module) if !is_cfg_test(&module.attrs) => {
                    let name = module.ident.unraw().to_string();
                    let module_path = format!("{}::{name}", scope.module_path);
                    let path = path_attribute(&module.attrs);
                    match &module.content {
                        Some((_, items)) => {
                            let inner = Scope {
                                file: scope.file,
                                dir: scope.dir.join(path.unwrap_or(name)),
                                inline: true,
                                module_path,
                            };
                            self.items(items, &inner);
                        }
                        None => {
                            let (file, mod_rs) = match path {
                                Some(path) if scope.inline => (scope.dir.join(path), true),
                                Some(path) => (
                                    scope.file.parent().unwrap_or(Path::new("")).join(path),
                                    true,
                                ),
                                None => {
                                    let flat = scope.dir.join(format!("{name}.rs"));
                                    if self.workspace_root.join(&flat).is_file() {
                                        (flat, false)
                                    } else {
                                        (scope.dir.join(&name).join("mod.rs"), true)
                                    }
                                }
                            };
                            if let Err(message) = self.file(&file, &module_path, mod_rs) {
                                let start = module.ident.span().start();
                                self.out.errors.push(Located {
                                    file: display(scope.file),
                                    line: start.line,
                                    column: start.column + 1,
                                    message: format!(
                                        "file not found for module `{name}`: {message}"
                                    ),
                                });
                            }
                        }
                    }
                }
                _ => {}
            }
        }
    }

    fn function(&mut self, function: &ItemFn, scope: &Scope<'_>) {
        let Some(index) = function.attrs.iter().position(is_cron) else {
            return;
        };
        let attr = &function.attrs[index];
        let args = match &attr.meta {
            Meta::List(list) => list.tokens.clone(),
            Meta::Path(_) => proc_macro2::TokenStream::new(),
            Meta::NameValue(_) => {
                self.errors(
                    scope.file,
                    syn::Error::new_spanned(
                        attr,
                        "expected `#[cron(\"<expression>\", …)]`, such as `#[cron(\"0 2 * * *\")]`",
                    ),
                    None,
                );
                return;
            }
        };
        // The item as the attribute sees it: without the attribute itself.
        let mut item = function.clone();
        item.attrs.remove(index);
        match attribute::parse(args, item.into_token_stream()) {
            Ok(cron) => {
                let verb = self.verb(&cron, scope);
                self.out.verbs.push((self.krate.to_owned(), verb));
            }
            Err(error) => self.errors(scope.file, error, Some(attr)),
        }
    }

    /// The verb as the registration generated by the attribute describes it.
    fn verb(&self, cron: &CronAttribute, scope: &Scope<'_>) -> Verb {
        let ident = &cron.function.sig.ident;
        let name = match &cron.name {
            Some(name) => name.value(),
            None => format!("{}::{}", scope.module_path, ident.unraw()),
        };
        let doc: Vec<String> = cron
            .doc()
            .into_iter()
            .map(|line| match line {
                DocLine::Text(text) => text,
                // `#[doc = include_str!(…)]` and the like are not evaluated.
                DocLine::Expr(_) => String::new(),
            })
            .collect();
        let line = ident.span().start().line;
        Verb::new(
            name,
            Cron {
                expression: cron.expression.value(),
                timezone: cron.timezone.map(str::to_owned),
                timeout: cron.timeout.as_ref().map(|timeout| timeout.value()),
                missed: cron.missed,
                retries: cron.retries,
                backoff: cron.backoff.as_ref().map(|backoff| backoff.value()),
                lease: cron.lease.as_ref().map(|lease| lease.value()),
                catch_up: cron.catch_up.as_ref().map(|window| window.value()),
                jitter: cron.jitter.as_ref().map(|jitter| jitter.value()),
                expect_within: cron.expect_within.as_ref().map(|within| within.value()),
                fixed: cron.fixed,
                on: cron.on,
            },
        )
        .doc(doc.join("\n"))
        .source(display(scope.file), u32::try_from(line).unwrap_or(u32::MAX))
    }

    /// Records each error of `error`. One that the attribute spans on the whole attribute
    /// (`Span::call_site()`) is placed on `attr`.
    fn errors(&mut self, file: &Path, error: syn::Error, attr: Option<&Attribute>) {
        for error in error {
            let span = error.span();
            let span = match attr {
                Some(attr) if span.byte_range() == (0..0) => attr.span(),
                _ => span,
            };
            let start = span.start();
            self.out.errors.push(Located {
                file: display(file),
                line: start.line,
                column: start.column + 1,
                message: error.to_string(),
            });
        }
    }
}

/// `#[cron(…)]`, `#[cronverb::cron(…)]` or `#[::cronverb::cron(…)]`; for cronverb under another name,
/// `#[<path>::cron(…)]` whose `crate = "<path>"` argument names the same path (the generated code reaches
/// cronverb through it, so without it the attribute is not cronverb's).
fn is_cron(attr: &Attribute) -> bool {
    let segments: Vec<String> = attr
        .path()
        .segments
        .iter()
        .map(|segment| segment.ident.to_string())
        .collect();
    match segments.split_last() {
        Some((last, [])) => last == "cron",
        Some((last, prefix)) if last == "cron" => {
            prefix == ["cronverb"] || crate_argument(attr).as_deref() == Some(prefix)
        }
        _ => false,
    }
}

/// The segments of the path in the attribute's `crate = "…"` argument.
fn crate_argument(attr: &Attribute) -> Option<Vec<String>> {
    let Meta::List(list) = &attr.meta else {
        return None;
    };
    let args = list
        .parse_args_with(Punctuated::<Expr, Token![,]>::parse_terminated)
        .ok()?;
    args.iter().find_map(|arg| {
        let Expr::Assign(assign) = arg else {
            return None;
        };
        let (
            Expr::Path(key),
            Expr::Lit(ExprLit {
                lit: Lit::Str(value),
                ..
            }),
        ) = (&*assign.left, &*assign.right)
        else {
            return None;
        };
        if !key.path.is_ident("crate") {
            return None;
        }
        let path = value.parse_with(syn::Path::parse_mod_style).ok()?;
        Some(path.segments.iter().map(|s| s.ident.to_string()).collect())
    })
}

/// `#[cfg(test)]`.
fn is_cfg_test(attrs: &[Attribute]) -> bool {
    attrs.iter().any(|attr| {
        attr.path().is_ident("cfg")
            && matches!(&attr.meta, Meta::List(list) if list.tokens.to_string() == "test")
    })
}

/// The value of `#[path = "…"]`.
fn path_attribute(attrs: &[Attribute]) -> Option<String> {
    attrs.iter().find_map(|attr| match &attr.meta {
        Meta::NameValue(meta) if meta.path.is_ident("path") => match &meta.value {
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(lit),
                ..
            }) => Some(lit.value()),
            _ => None,
        },
        _ => None,
    })
}

/// A path as `file!()` shows it.
fn display(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}
