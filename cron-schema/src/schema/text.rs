//! The text form of a schema, for people:
//!
//! ```text
//! module billing {
//!   // Sends yesterday's invoices.
//!   verb send_invoices(Unit) Unit
//!     +cron 0 2 * * * Europe/Berlin timeout=10m retries=3 backoff=30s
//! }
//! ```

use std::fmt;

use super::{Cron, Module, SCHEMA_VERSION, Schema, SchemaError, Verb};
use crate::{MissedPolicy, RunOn};

pub(super) fn write(schema: &Schema, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    for (index, module) in schema.modules.iter().enumerate() {
        if index > 0 {
            writeln!(f)?;
        }
        writeln!(f, "module {} {{", module.name)?;
        for (index, verb) in module.verbs.iter().enumerate() {
            if index > 0 {
                writeln!(f)?;
            }
            write_verb(&module.name, verb, f)?;
        }
        writeln!(f, "}}")?;
    }
    Ok(())
}

fn write_verb(module: &str, verb: &Verb, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    if !verb.doc.is_empty() {
        for line in verb.doc.lines() {
            if line.is_empty() {
                writeln!(f, "  //")?;
            } else {
                writeln!(f, "  // {line}")?;
            }
        }
    }
    let name = verb.name_in(module);
    let prefix = if name == verb.name { "::" } else { "" };
    writeln!(f, "  verb {prefix}{name}(Unit) Unit")?;
    let cron = &verb.cron;
    write!(f, "    +cron {}", expression_words(&cron.expression))?;
    if let Some(zone) = &cron.timezone {
        write!(f, " {zone}")?;
    }
    if let Some(timeout) = &cron.timeout {
        write!(f, " timeout={timeout}")?;
    }
    if cron.missed != MissedPolicy::default() {
        write!(f, " missed={}", cron.missed)?;
    }
    if cron.retries != 0 {
        write!(f, " retries={}", cron.retries)?;
    }
    if let Some(backoff) = &cron.backoff {
        write!(f, " backoff={backoff}")?;
    }
    if let Some(lease) = &cron.lease {
        write!(f, " lease={lease}")?;
    }
    if cron.on != RunOn::default() {
        write!(f, " on={}", cron.on)?;
    }
    if let Some(catch_up) = &cron.catch_up {
        write!(f, " catch_up={catch_up}")?;
    }
    if let Some(jitter) = &cron.jitter {
        write!(f, " jitter={jitter}")?;
    }
    if let Some(within) = &cron.expect_within {
        write!(f, " expect_within={within}")?;
    }
    if cron.fixed {
        write!(f, " fixed")?;
    }
    writeln!(f)
}

/// The expression's fields separated by one space.
fn expression_words(expression: &str) -> String {
    expression.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Reads what [`write`] writes. Blank lines are ignored anywhere.
pub(super) fn parse(text: &str) -> Result<Schema, SchemaError> {
    let mut modules: Vec<Module> = Vec::new();
    let mut module: Option<Module> = None;
    let mut doc: Vec<&str> = Vec::new();
    // The verb whose `+cron` line comes next: its name and doc.
    let mut pending: Option<(usize, String, String)> = None;

    for (index, line) in text.lines().enumerate() {
        let number = index + 1;
        let error = |message: String| SchemaError::Text {
            line: number,
            message,
        };
        let trimmed = line.trim();
        if trimmed.is_empty() {
            continue;
        }
        if let Some((verb_line, name, _)) = &pending
            && !trimmed.starts_with("+cron")
        {
            return Err(SchemaError::Text {
                line: *verb_line,
                message: format!("verb `{name}` has no `+cron` line"),
            });
        }

        let Some(current) = &mut module else {
            let name = trimmed
                .strip_prefix("module ")
                .and_then(|rest| rest.strip_suffix('{'))
                .map(str::trim)
                .filter(|name| !name.is_empty() && !name.contains(char::is_whitespace));
            match name {
                Some(name) => {
                    module = Some(Module {
                        name: name.to_owned(),
                        verbs: Vec::new(),
                    });
                    continue;
                }
                None => {
                    return Err(error(format!(
                        "expected `module <name> {{`, found `{trimmed}`"
                    )));
                }
            }
        };

        if trimmed == "}" {
            if !doc.is_empty() {
                return Err(error(
                    "a `//` doc comment is not followed by a verb".to_owned(),
                ));
            }
            modules.extend(module.take());
        } else if let Some(comment) = trimmed.strip_prefix("//") {
            doc.push(comment.strip_prefix(' ').unwrap_or(comment));
        } else if let Some(rest) = trimmed.strip_prefix("verb ") {
            let Some(name) = rest.trim().strip_suffix("(Unit) Unit") else {
                return Err(error(format!(
                    "expected `verb <name>(Unit) Unit`, found `{trimmed}`"
                )));
            };
            if name.is_empty() || name.contains(char::is_whitespace) {
                return Err(error(format!("invalid verb name `{name}`")));
            }
            let name = match name.strip_prefix("::") {
                Some(absolute) => absolute.to_owned(),
                None => format!("{}::{name}", current.name),
            };
            pending = Some((number, name, doc.join("\n")));
            doc.clear();
        } else if let Some(rest) = trimmed.strip_prefix("+cron") {
            let Some((_, name, verb_doc)) = pending.take() else {
                return Err(error("a `+cron` line must follow a `verb` line".to_owned()));
            };
            let mut verb = Verb::new(name, parse_cron(rest).map_err(error)?);
            verb.doc = verb_doc;
            current.verbs.push(verb);
        } else {
            return Err(error(format!(
                "expected `verb`, `//`, `+cron` or `}}`, found `{trimmed}`"
            )));
        }
    }
    if let Some((line, name, _)) = pending {
        return Err(SchemaError::Text {
            line,
            message: format!("verb `{name}` has no `+cron` line"),
        });
    }
    if let Some(module) = module {
        return Err(SchemaError::Text {
            line: text.lines().count(),
            message: format!("module `{}` is not closed with `}}`", module.name),
        });
    }
    Ok(Schema {
        version: SCHEMA_VERSION,
        modules,
    })
}

/// `<expression> [<zone>] [timeout=<duration>] [missed=<policy>] [retries=<n>] [backoff=<duration>]
/// [lease=<duration>] [on=<replicas>] [catch_up=<window>] [jitter=<duration>] [expect_within=<duration>]
/// [fixed]`. Expression fields never contain a letter, so a last word with a letter other than `fixed`
/// is the zone.
fn parse_cron(text: &str) -> Result<Cron, String> {
    let mut words: Vec<&str> = Vec::new();
    let mut timeout = None;
    let mut missed = MissedPolicy::default();
    let mut retries = 0;
    let mut backoff = None;
    let mut lease = None;
    let mut on = RunOn::default();
    let mut catch_up = None;
    let mut jitter = None;
    let mut expect_within = None;
    let mut fixed = false;
    for word in text.split_whitespace() {
        if word == "fixed" {
            fixed = true;
        } else if let Some(value) = word.strip_prefix("timeout=") {
            timeout = Some(value.to_owned());
        } else if let Some(value) = word.strip_prefix("missed=") {
            missed = value.parse().map_err(|e| format!("{e}"))?;
        } else if let Some(value) = word.strip_prefix("retries=") {
            retries = value.parse().map_err(|_| {
                format!(
                    "`retries={value}` is not a number of retries; expected such as `retries=3`"
                )
            })?;
        } else if let Some(value) = word.strip_prefix("backoff=") {
            backoff = Some(value.to_owned());
        } else if let Some(value) = word.strip_prefix("lease=") {
            lease = Some(value.to_owned());
        } else if let Some(value) = word.strip_prefix("on=") {
            on = value.parse().map_err(|e| format!("{e}"))?;
        } else if let Some(value) = word.strip_prefix("catch_up=") {
            catch_up = Some(value.to_owned());
        } else if let Some(value) = word.strip_prefix("jitter=") {
            jitter = Some(value.to_owned());
        } else if let Some(value) = word.strip_prefix("expect_within=") {
            expect_within = Some(value.to_owned());
        } else if word.contains('=') {
            return Err(format!(
                "unknown `+cron` option `{word}`; expected `timeout=…`, `missed=…`, `retries=…`, \
                 `backoff=…`, `lease=…`, `on=…`, `catch_up=…`, `jitter=…` or `expect_within=…`"
            ));
        } else {
            words.push(word);
        }
    }
    let timezone = match words.last() {
        Some(last) if last.contains(|c: char| c.is_ascii_alphabetic()) => {
            words.pop().map(str::to_owned)
        }
        _ => None,
    };
    if words.is_empty() {
        return Err("`+cron` needs an expression".to_owned());
    }
    Ok(Cron {
        expression: words.join(" "),
        timezone,
        timeout,
        missed,
        retries,
        backoff,
        lease,
        on,
        catch_up,
        jitter,
        expect_within,
        fixed,
    })
}
