// sqlx::migrate! embeds cron-runtime/migrations (PostgreSQL's, the files of that directory) and
// cron-runtime/migrations/sqlite at compile time: rebuild when a migration is added or edited, not only when
// Rust sources change.
fn main() {
    println!("cargo:rerun-if-changed=migrations");
    println!("cargo:rerun-if-changed=migrations/sqlite");
}
