//! Compile errors of the `#[cron]` attribute (`tests/ui/`), and programs that must compile and run
//! (`tests/pass/`). Regenerate the `.stderr` files with `TRYBUILD=overwrite cargo test --test ui`, then
//! read every changed one as a user would.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
    t.pass("tests/pass/*.rs");
}
