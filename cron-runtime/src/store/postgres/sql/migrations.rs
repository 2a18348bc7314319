//! What the migrations leave behind: sqlx's `_sqlx_migrations` and cronverb's `cron_compatibility`
//! (docs/operations.md, "Migrations across releases").

statements! { "migrations";
    /// Whether sqlx's table exists where sqlx creates and reads it: in the current schema.
    MIGRATIONS_TABLE_EXISTS = "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_tables
    WHERE schemaname = current_schema() AND tablename = '_sqlx_migrations')";

    /// The oldest migration a build must know to use the tables.
    REQUIRED_MIGRATION = "SELECT required_migration FROM cron_compatibility";
}
