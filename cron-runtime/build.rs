// sqlx::migrate! embeds cron-runtime/migrations at compile time: rebuild when a migration is added or
// edited, not only when Rust sources change.
fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
