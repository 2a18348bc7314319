//! Every SQL statement of the PostgreSQL store, one module per table family, each statement a named,
//! documented constant. A fragment that several statements share is a macro that expands to a string
//! literal, so a statement is one `concat!` and still a `&'static str` that PostgreSQL prepares once per
//! connection.
//!
//! Each module declares its statements through [`statements!`], which also lists them in the module's
//! `STATEMENTS`; [`super::statements`] gathers those lists for the test that prepares every statement
//! against the migrated schema (cron-runtime/tests/pg_statements.rs).
//!
//! A statement that goes with one of another family says so once, on the side that names the other:
//! `jobs` names `runs` (the claim's two statements, the two sides of ending runs) and `deployments`;
//! `runs` and `deployments` name no other family, so no family names one that names it back
//! (docs/architecture.md).

/// Declares a module's statements as constants, and lists them as `STATEMENTS: &[(name, SQL)]`, the
/// names prefixed with `$family` (`runs::END_RUNS`), so that no statement can be left out of the list.
macro_rules! statements {
    ($family:literal; $( $(#[$doc:meta])* $name:ident = $sql:expr; )*) => {
        $(
            $(#[$doc])*
            pub(in crate::store::postgres) const $name: &str = $sql;
        )*

        /// Every statement of this module, as `(name, SQL)`.
        pub(in crate::store::postgres) const STATEMENTS: &[(&str, &str)] =
            &[$((concat!($family, "::", stringify!($name)), $name)),*];
    };
}

/// When a run claimed now for the instant `$instant` (an occurrence, a trigger's or a retry's instant)
/// is planned to start: at its instant, or now when claimed after it. `rules::start_of`, in SQL.
macro_rules! claimed_start {
    ($instant:literal) => {
        concat!("greatest(now(), ", $instant, ")")
    };
}

/// When the lease of a run claimed now for `$instant` runs out: its job's own lease (`$row_lease`, the
/// row's `lease`), or `$secs` seconds for a job that sets none, from its planned start
/// ([`claimed_start!`]), so a run claimed ahead holds its lease from its instant (G4,
/// docs/operations.md). `rules::lease_expires`, in SQL: the one rule every store applies, written here
/// for the statements that record a batch of runs at once.
macro_rules! lease_from {
    ($instant:literal, $row_lease:literal, $secs:literal) => {
        concat!(
            claimed_start!($instant),
            " + coalesce(",
            $row_lease,
            ", make_interval(secs => ",
            $secs,
            "))"
        )
    };
}

pub(super) mod clock;
pub(super) mod deployments;
pub(super) mod jobs;
pub(super) mod migrations;
pub(super) mod notify;
pub(super) mod runners;
pub(super) mod runs;

/// Every statement of the store's runtime side, as `(name, SQL)`.
pub(super) const FAMILIES: &[&[(&str, &str)]] = &[
    clock::STATEMENTS,
    deployments::STATEMENTS,
    jobs::STATEMENTS,
    migrations::STATEMENTS,
    notify::STATEMENTS,
    runners::STATEMENTS,
    runs::STATEMENTS,
];
