//! The schema of this binary, built from its registry.

use cron_schema::{Cron, Schema, Verb, module_of};

use crate::defaults::DEFAULT_MODULE;
use crate::job::{Job, jobs};
use crate::registration::Registration;

/// The schema of this binary: every job of [`jobs()`], grouped by module, with its cron metadata, doc
/// comment and source location. `cronverb schema extract` computes the same schema from the sources.
///
/// The module of a `#[cron]` function is its crate, the first segment of its `module_path!()`; the
/// module of a job added with [`RuntimeBuilder::job`](crate::RuntimeBuilder::job) is the first
/// `::`-separated segment of its name, or [`DEFAULT_MODULE`] when the name has none. `docs/schema.md`
/// describes both forms.
///
/// An application can print it for deploy tooling, behind a flag of its own:
///
/// ```no_run
/// if std::env::args().any(|arg| arg == "--emit-schema") {
///     print!("{}", cron_runtime::schema().to_json());
///     return;
/// }
/// ```
pub fn schema() -> Schema {
    let registrations: Vec<&Registration> = inventory::iter::<Registration>.into_iter().collect();
    Schema::new(jobs().into_iter().map(|job| {
        let registration = registrations
            .iter()
            .find(|r| r.name == job.name && r.file == job.file && r.line == job.line);
        let module = module_of_job(&job.name, registration.map(|r| r.module_path)).to_owned();
        (module, verb(job))
    }))
}

/// The module of a job: the crate of a `#[cron]` function (`module_path` is its `module_path!()`), the
/// first `::`-separated segment of the name of a job added with the builder, else [`DEFAULT_MODULE`].
/// The schema groups jobs by it, and the runtime's default module is the one its jobs share
/// (docs/schema.md, docs/runtime.md).
pub(crate) fn module_of_job<'a>(name: &'a str, module_path: Option<&'a str>) -> &'a str {
    match module_path {
        Some(path) => module_of(path),
        None if name.contains("::") => module_of(name),
        None => DEFAULT_MODULE,
    }
}

pub(crate) fn verb(job: Job) -> Verb {
    let cron = Cron {
        expression: job.expression,
        timezone: job.timezone,
        timeout: job.timeout,
        missed: job.missed,
        retries: job.retries,
        backoff: job.backoff,
        lease: job.lease,
        on: job.on,
        catch_up: job.catch_up,
        jitter: job.jitter,
        expect_within: job.expect_within,
        fixed: job.fixed,
    };
    Verb::new(job.name, cron)
        .doc(job.doc)
        .source(job.file, job.line)
}
