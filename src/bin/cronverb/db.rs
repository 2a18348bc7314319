//! What the database commands share: where the database is, how long to wait for it, how failures map
//! to exit statuses, and how results are printed (aligned text for people, `--json` for tools).
//!
//! Exit status: 0 on success; 2 when what was given is wrong (a missing database URL, an unknown verb or
//! module, a schema file that is not a valid schema, a malformed option); 1 when the database fails or
//! does not answer, or refuses in its current state (a trigger while the verb is executing, tables that
//! a newer release contracted, a malformed SQLite file before `prune`). `trigger --wait` adds its own:
//! 3 when the run ended without succeeding, 4 when `--timeout` passed first. A command whose 0 and 1
//! are its answer (`schema diff --database-url`: equal, different; [`run_answering`]) exits 2 when the
//! database fails or refuses, so that a failure is never read as an answer.

use std::fmt;
use std::future::Future;
use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use chrono::{DateTime, Utc};
use cronverb::admin::{Actor, Admin, AdminError, Origin, Since};
use cronverb::redact::redact;
use cronverb::sqlx::migrate::Migrator;
use cronverb::{PgStore, SqliteStore, StoreError};

use crate::escape::escape;

/// How long a command waits for the database to accept a connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The longest age or retention a command takes (`36500d`, about a century): the runtime's own bound on
/// `history_retention`, so that a retention the runtime refuses is refused here too.
pub const MAX_AGE: Duration = cronverb::MAX_HISTORY_RETENTION;

/// The verb a command acts on, as every command that names one takes it.
#[derive(Debug, clap::Args)]
pub struct Verb {
    /// The verb: its full name (`billing::send_invoices`) or its name in its module
    #[arg(value_name = "VERB")]
    verb: String,
    /// The verb's module, when its name is in several
    #[arg(long, value_name = "NAME")]
    module: Option<String>,
}

impl Verb {
    /// The verb as given.
    pub fn name(&self) -> &str {
        &self.verb
    }

    /// The module given with it, if any.
    pub fn module(&self) -> Option<&str> {
        self.module.as_deref()
    }
}

/// The database and the output form, common to every database command.
#[derive(Debug, clap::Args)]
pub struct Connection {
    /// The database: a PostgreSQL URL (`postgres://user@host/db`, `postgresql://…`) or a SQLite file
    /// (`sqlite://path/to/cron.db`) [default: the `DATABASE_URL` environment variable]
    #[arg(long, value_name = "URL")]
    database_url: Option<String>,
    /// Print the result as JSON (the shape is described in docs/operations.md)
    #[arg(long)]
    pub json: bool,
    /// Who the audit trail records as acting [default: the operating system's user, `USER` or
    /// `LOGNAME`]
    #[arg(long, value_name = "NAME")]
    actor: Option<String>,
}

impl Connection {
    /// The database at `url`, for a command that reads it and prints no JSON of its own
    /// (`schema diff --database-url`).
    pub fn to(url: &str) -> Connection {
        Connection {
            database_url: Some(url.to_owned()),
            json: false,
            actor: None,
        }
    }

    /// Who acts: `--actor`, else the operating system's user, from the command line on this host.
    fn actor(&self) -> Actor {
        let name = self
            .actor
            .clone()
            .filter(|name| !name.trim().is_empty())
            .unwrap_or_else(Actor::os_user);
        Actor::new(name, Origin::Cli)
    }
}

/// Why a command failed, and the exit status that says so.
#[derive(Debug)]
pub enum Failure {
    /// What was given is wrong. Exit status 2.
    Invalid(String),
    /// The database failed or refused. Exit status 1; 2 under [`run_answering`], whose 1 is an
    /// answer.
    Other(String),
    /// The command did what it was asked, and its result has an exit status of its own (`trigger
    /// --wait`); the message, when there is one, is printed as an error.
    Status(u8, Option<String>),
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Invalid(message)
            | Failure::Other(message)
            | Failure::Status(_, Some(message)) => f.write_str(message),
            Failure::Status(_, None) => Ok(()),
        }
    }
}

impl From<AdminError> for Failure {
    fn from(error: AdminError) -> Failure {
        if error.is_invalid_input() {
            Failure::Invalid(error.to_string())
        } else {
            Failure::Other(error.to_string())
        }
    }
}

impl From<StoreError> for Failure {
    fn from(error: StoreError) -> Failure {
        Failure::Other(error.to_string())
    }
}

/// SQLite's check of a file's structure, as [`Database::check_whole`] runs it: one row `ok`, or a row per
/// problem found.
const QUICK_CHECK: &str = "PRAGMA quick_check";

/// The URL schemes the database commands accept, as the error for another one lists them.
const SCHEMES: &str = "`postgres://`, `postgresql://`, `sqlite://`";

/// The database a command works on, and who acts on it.
#[derive(Debug)]
pub struct Database {
    store: Store,
    /// Who the audit trail records as acting (`--actor`).
    actor: Actor,
}

/// The store of a [`Database`]; the URL's scheme chose it.
#[derive(Debug)]
enum Store {
    Postgres(PgStore),
    Sqlite(SqliteStore),
}

impl Database {
    /// The operator commands on this database, acting as `--actor` from the command line.
    pub fn admin(&self) -> Admin {
        let admin = match &self.store {
            Store::Postgres(store) => store.admin(),
            Store::Sqlite(store) => store.admin(),
        };
        admin.with_actor(self.actor.clone())
    }

    /// Refuses tables that a newer release contracted, as the replicas and `migrate` do
    /// (docs/operations.md, "Migrations across releases"). A database whose check cannot be read is
    /// left to the command: with no tables yet (`cron_compatibility` is in the first migration), the
    /// command's own error says to run `cronverb migrate`.
    pub async fn check_compatible(&self) -> Result<(), Failure> {
        let checked = match &self.store {
            Store::Postgres(store) => store.check_compatible().await,
            Store::Sqlite(store) => store.check_compatible().await,
        };
        match checked {
            Err(StoreError::Invalid(message)) => Err(Failure::Other(message)),
            _ => Ok(()),
        }
    }

    /// Refuses a SQLite file whose structure is damaged (`PRAGMA quick_check`: every page of every
    /// table and index is read), before a command deletes from it: a statement reads only the pages
    /// it needs, so a damaged page elsewhere would go unnoticed and the deletions would be written
    /// into a malformed file. A PostgreSQL server keeps its own files whole.
    pub async fn check_whole(&self) -> Result<(), Failure> {
        let Store::Sqlite(store) = &self.store else {
            return Ok(());
        };
        let context = "checking the SQLite file before changing it";
        let lines: Vec<String> = cronverb::sqlx::query_scalar(QUICK_CHECK)
            .fetch_all(store.pool())
            .await
            .map_err(|error| Failure::Other(format!("while {context}: {error}")))?;
        if lines.len() == 1 && lines[0] == "ok" {
            return Ok(());
        }
        Err(Failure::Other(format!(
            "while {context}: the file is malformed ({}); restore it from a backup",
            lines.join("; ")
        )))
    }

    /// Creates or upgrades cronverb's tables.
    pub async fn migrate(&self) -> Result<(), StoreError> {
        match &self.store {
            Store::Postgres(store) => store.migrate().await,
            Store::Sqlite(store) => store.migrate().await,
        }
    }

    /// The migrations the runtime embeds for this database.
    pub fn migrator(&self) -> &'static Migrator {
        match &self.store {
            Store::Postgres(_) => PgStore::migrator(),
            Store::Sqlite(_) => SqliteStore::migrator(),
        }
    }
}

/// Which database `url` names, by its scheme.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Postgres,
    Sqlite,
}

/// The database `url`'s scheme names, or why it names none this tool works with. What follows the
/// scheme is checked by the store's own parser.
fn kind(url: &str) -> Result<Kind, Failure> {
    // The scheme as the runtime's builder reads it (`sqlite:` picks the SQLite store).
    if url
        .trim_start()
        .get(..7)
        .is_some_and(|scheme| scheme.eq_ignore_ascii_case("sqlite:"))
    {
        return Ok(Kind::Sqlite);
    }
    match url.trim_start().split_once("://") {
        Some((scheme, _))
            if !scheme.eq_ignore_ascii_case("postgres")
                && !scheme.eq_ignore_ascii_case("postgresql") =>
        {
            Err(Failure::Invalid(format!(
                "unsupported database URL `{}`: scheme `{scheme}` is not one of {SCHEMES}",
                redact(url)
            )))
        }
        _ => Ok(Kind::Postgres),
    }
}

/// Connects to the database, refuses tables that a newer release contracted
/// ([`Database::check_compatible`]) and runs `command` on a single-threaded runtime. Prints `error: …`
/// on standard error and returns the exit status on failure. A SQLite file must exist: only `migrate`
/// ([`run_creating`]) creates one.
pub fn run<F, Fut>(connection: &Connection, command: F) -> ExitCode
where
    F: FnOnce(Database) -> Fut,
    Fut: Future<Output = Result<(), Failure>>,
{
    run_with(connection, false, FAILED, command)
}

/// [`run`], for a command whose exit statuses 0 and 1 are its answer (`schema diff`: equal,
/// different): a database that fails or refuses exits 2, as what was given wrong does, so that a
/// failure is never read as an answer.
pub fn run_answering<F, Fut>(connection: &Connection, command: F) -> ExitCode
where
    F: FnOnce(Database) -> Fut,
    Fut: Future<Output = Result<(), Failure>>,
{
    run_with(connection, false, INVALID, command)
}

/// The exit status of what was given wrong.
const INVALID: u8 = 2;
/// The exit status of a database that fails or refuses.
const FAILED: u8 = 1;

/// [`run`], creating the SQLite file when it is missing, for `migrate`, which checks the tables' compatibility
/// itself after migrating them.
pub fn run_creating<F, Fut>(connection: &Connection, command: F) -> ExitCode
where
    F: FnOnce(Database) -> Fut,
    Fut: Future<Output = Result<(), Failure>>,
{
    run_with(connection, true, FAILED, command)
}

/// Opens the database and runs `command`; a database that fails or refuses exits `failed`.
fn run_with<F, Fut>(connection: &Connection, create: bool, failed: u8, command: F) -> ExitCode
where
    F: FnOnce(Database) -> Fut,
    Fut: Future<Output = Result<(), Failure>>,
{
    let result = (|| {
        let url = match &connection.database_url {
            Some(url) => url.clone(),
            None => std::env::var("DATABASE_URL")
                .ok()
                .filter(|url| !url.is_empty())
                .ok_or_else(|| {
                    Failure::Invalid(
                        "no database given: pass `--database-url` or set `DATABASE_URL`".to_owned(),
                    )
                })?,
        };
        let kind = kind(&url)?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| Failure::Other(format!("while starting the async runtime: {e}")))?;
        runtime.block_on(async {
            let store = match kind {
                Kind::Postgres => Store::Postgres(
                    PgStore::connect_with_timeout(&url, CONNECT_TIMEOUT)
                        .await
                        .map_err(connecting)?,
                ),
                Kind::Sqlite if create => {
                    Store::Sqlite(SqliteStore::connect(&url).await.map_err(connecting)?)
                }
                Kind::Sqlite => match SqliteStore::connect_existing(&url)
                    .await
                    .map_err(connecting)?
                {
                    Some(store) => Store::Sqlite(store),
                    None => {
                        return Err(Failure::Other(format!(
                            "no SQLite database at `{}`: `cronverb migrate` creates it",
                            redact(&url)
                        )));
                    }
                },
            };
            let database = Database {
                store,
                actor: connection.actor(),
            };
            if !create {
                database.check_compatible().await?;
            }
            command(database).await
        })
    })();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            if !matches!(failure, Failure::Status(_, None)) {
                eprintln!("error: {}", escape(&failure.to_string()));
            }
            match failure {
                Failure::Invalid(_) => ExitCode::from(INVALID),
                Failure::Other(_) => ExitCode::from(failed),
                Failure::Status(code, _) => ExitCode::from(code),
            }
        }
    }
}

/// A failure to open the database: a URL that is not one is what was typed wrong (the store's message
/// shows it redacted); anything else is the database's.
fn connecting(error: StoreError) -> Failure {
    match error {
        StoreError::Invalid(message) => Failure::Invalid(message),
        error => Failure::Other(error.to_string()),
    }
}

/// Writes `text` to standard output.
pub fn print(text: &str) -> Result<(), Failure> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(|error| Failure::Other(format!("while writing to standard output: {error}")))
}

/// Writes `value` as pretty JSON and a newline to standard output.
pub fn print_json(value: &impl serde::Serialize) -> Result<(), Failure> {
    let mut json = serde_json::to_string_pretty(value)
        .map_err(|error| Failure::Other(format!("while writing JSON: {error}")))?;
    json.push('\n');
    print(&json)
}

/// Rows under a header, each column as wide as its widest cell, two spaces apart, indented by `indent`.
/// Each cell is shown [`escape`]d.
pub fn table(indent: &str, header: &[&str], rows: &[Vec<String>]) -> String {
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|row| row.iter().map(|cell| escape(cell).into_owned()).collect())
        .collect();
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut text = String::new();
    let header: Vec<String> = header.iter().map(|h| (*h).to_owned()).collect();
    for row in std::iter::once(&header).chain(&rows) {
        let mut line = indent.to_owned();
        for (i, (cell, width)) in row.iter().zip(&widths).enumerate() {
            if i > 0 {
                line.push_str("  ");
            }
            line.push_str(cell);
            line.extend(std::iter::repeat_n(' ', width - cell.chars().count()));
        }
        text.push_str(line.trim_end());
        text.push('\n');
    }
    text
}

/// An instant for people: UTC, whole seconds, `Z`.
pub fn instant(at: Option<DateTime<Utc>>) -> String {
    match at {
        Some(at) => at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        None => "-".to_owned(),
    }
}

/// A lower bound on an instant as operators write it: an RFC 3339 instant or an age ([`parse_age`]),
/// for `runs --since` and `audit --since`.
pub fn parse_since(text: &str) -> Result<Since, String> {
    if let Ok(at) = DateTime::parse_from_rfc3339(text) {
        return Ok(Since::Instant(at.with_timezone(&Utc)));
    }
    parse_age(text).map(Since::Ago).map_err(|age_error| {
        // An age (`2d`, `9999999d`) is told what is wrong with it; anything else is told both forms.
        if text.bytes().all(|b| b.is_ascii_alphanumeric()) && text.starts_with(|c: char| c.is_ascii_digit()) {
            return age_error;
        }
        format!(
            "invalid `{text}`; expected an RFC 3339 instant such as `2026-03-08T07:00:00Z` or an age such as `1h` or `2d`"
        )
    })
}

/// An age or retention as operators write it: `30d`, `12h`, `1d12h`, `90m`, `45s` (days, then
/// `h`/`m`/`s` as timeouts are written), from one second to [`MAX_AGE`].
pub fn parse_age(text: &str) -> Result<Duration, String> {
    let invalid = || {
        format!(
            "invalid duration `{text}`; expected a number with a unit, such as `30d`, `12h`, `1d12h` or `90m`"
        )
    };
    let (days, rest) = match text.split_once('d') {
        Some((days, rest)) => {
            let days: u64 = days
                .parse()
                .ok()
                .filter(|_| days.bytes().all(|b| b.is_ascii_digit()))
                .ok_or_else(invalid)?;
            (days, rest)
        }
        None => (0, text),
    };
    let rest = if rest.is_empty() {
        Duration::ZERO
    } else {
        cron_schema::parse_duration(rest).map_err(|_| invalid())?
    };
    let total = days
        .checked_mul(24 * 3600)
        .map(Duration::from_secs)
        .and_then(|days| days.checked_add(rest))
        .ok_or_else(invalid)?;
    if total.is_zero() {
        return Err(format!(
            "duration `{text}` is zero; it must be at least one second"
        ));
    }
    if total > MAX_AGE {
        return Err(format!(
            "duration `{text}` is too long; it must be at most `{}`",
            age(MAX_AGE)
        ));
    }
    Ok(total)
}

/// An age for people, as [`parse_age`] reads it: `36500d`, `1d12h`, `10m5s`.
pub fn age(age: Duration) -> String {
    let secs = age.as_secs();
    let (days, rest) = (secs / 86400, secs % 86400);
    let mut text = String::new();
    if days > 0 {
        text.push_str(&format!("{days}d"));
    }
    if rest > 0 || days == 0 {
        text.push_str(&cron_schema::format_duration(Duration::from_secs(rest)));
    }
    text
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{parse_age, table};

    #[test]
    fn ages_have_days() {
        assert_eq!(parse_age("30d"), Ok(Duration::from_secs(30 * 86400)));
        assert_eq!(parse_age("1d12h"), Ok(Duration::from_secs(36 * 3600)));
        assert_eq!(parse_age("90m"), Ok(Duration::from_secs(5400)));
        assert!(parse_age("0d").is_err());
        assert!(parse_age("d").is_err());
        assert!(parse_age("-1d").is_err());
        assert!(parse_age("1w").is_err());
        assert_eq!(parse_age("36500d"), Ok(super::MAX_AGE));
        assert_eq!(
            parse_age("36500d1s"),
            Err("duration `36500d1s` is too long; it must be at most `36500d`".to_owned())
        );
        assert_eq!(super::age(Duration::from_secs(605)), "10m5s");
    }

    #[test]
    fn tables_align() {
        let rows = vec![vec!["a".to_owned(), "bb".to_owned()]];
        assert_eq!(table("  ", &["XYZ", "W"], &rows), "  XYZ  W\n  a    bb\n");
    }

    #[test]
    fn table_cells_are_escaped_and_aligned_as_shown() {
        let rows = vec![
            vec!["a\u{1b}[2J".to_owned(), "x".to_owned()],
            vec!["b".to_owned(), "y".to_owned()],
        ];
        assert_eq!(
            table("", &["V", "W"], &rows),
            "V           W\na\\u{1b}[2J  x\nb           y\n"
        );
    }
}
