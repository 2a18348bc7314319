//! The checks, over cron_job_runs (cronverb's bookkeeping) and test_executions (what the handlers did,
//! by the database's clock).

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

use chrono::{DateTime, Duration, DurationRound, Utc};
use sqlx::PgPool;

/// A row of cron_job_runs.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct Run {
    pub id: i64,
    pub deployment: Option<String>,
    pub verb: String,
    pub scheduled_at: DateTime<Utc>,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
    pub outcome: String,
    pub error: Option<String>,
    pub runner: String,
    pub skipped: i32,
}

/// A row of test_executions: one handler execution.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct Execution {
    pub id: i64,
    pub verb: String,
    pub scheduled_at: DateTime<Utc>,
    pub run_id: i64,
    pub replica: String,
    pub deployment: String,
    pub started_at: DateTime<Utc>,
    pub last_tick_at: Option<DateTime<Utc>>,
    pub ticks: i32,
    pub finished_at: Option<DateTime<Utc>>,
    pub dropped_at: Option<DateTime<Utc>>,
}

impl Execution {
    /// The last effect the handler had: its end, else its last tick, else its start.
    pub fn last_effect(&self) -> DateTime<Utc> {
        [Some(self.started_at), self.last_tick_at, self.finished_at]
            .into_iter()
            .flatten()
            .max()
            .expect("started_at is always there")
    }
}

pub async fn load_runs(pool: &PgPool) -> anyhow::Result<Vec<Run>> {
    Ok(sqlx::query_as(
        "SELECT r.id, d.key AS deployment, r.verb, r.scheduled_at, r.started_at, r.finished_at, \
                r.outcome, r.error, r.runner, r.skipped \
         FROM cron_job_runs r LEFT JOIN cron_deployments d ON d.id = r.deployment_id \
         ORDER BY r.verb, r.scheduled_at",
    )
    .fetch_all(pool)
    .await?)
}

pub async fn load_executions(pool: &PgPool) -> anyhow::Result<Vec<Execution>> {
    Ok(sqlx::query_as(
        "SELECT id, verb, scheduled_at, run_id, replica, deployment, started_at, last_tick_at, ticks, \
                finished_at, dropped_at \
         FROM test_executions ORDER BY verb, started_at",
    )
    .fetch_all(pool)
    .await?)
}

/// Times as seconds and milliseconds, for reports.
pub fn t(at: DateTime<Utc>) -> String {
    at.format("%H:%M:%S%.3f").to_string()
}

/// The violations found, collected so that one failing test reports all of them.
#[derive(Debug, Default)]
pub struct Violations(pub Vec<String>);

impl Violations {
    pub fn add(&mut self, violation: impl Into<String>) {
        self.0.push(violation.into());
    }

    pub fn check(&mut self, ok: bool, violation: impl FnOnce() -> String) {
        if !ok {
            self.0.push(violation());
        }
    }

    pub fn assert_none(&self) {
        if !self.0.is_empty() {
            let mut text = format!("{} violation(s):\n", self.0.len());
            for v in &self.0 {
                let _ = writeln!(text, "- {v}");
            }
            panic!("{text}");
        }
    }
}

/// No `(verb, scheduled_at)` executed twice (the side table), and every execution belongs to a run of
/// cronverb's history with the same verb and instant.
pub fn check_once(runs: &[Run], executions: &[Execution], v: &mut Violations) {
    let mut seen: HashMap<(&str, DateTime<Utc>), &Execution> = HashMap::new();
    for e in executions {
        if let Some(first) = seen.insert((&e.verb, e.scheduled_at), e) {
            v.add(format!(
                "`{}` at {} executed twice: by {} (run {}, started {}) and by {} (run {}, started {})",
                e.verb,
                t(e.scheduled_at),
                first.replica,
                first.run_id,
                t(first.started_at),
                e.replica,
                e.run_id,
                t(e.started_at)
            ));
        }
    }
    let by_id: HashMap<i64, &Run> = runs.iter().map(|r| (r.id, r)).collect();
    for e in executions {
        match by_id.get(&e.run_id) {
            None => v.add(format!(
                "execution of `{}` at {} by {} names run {}, which cron_job_runs does not have",
                e.verb,
                t(e.scheduled_at),
                e.replica,
                e.run_id
            )),
            Some(r) => v.check(r.verb == e.verb && r.scheduled_at == e.scheduled_at, || {
                format!(
                    "execution {} (`{}` at {}) runs run {} which is `{}` at {}",
                    e.id,
                    e.verb,
                    t(e.scheduled_at),
                    r.id,
                    r.verb,
                    t(r.scheduled_at)
                )
            }),
        }
    }
    // A run recorded as having run its handler to the end did so exactly once.
    let mut executions_of: HashMap<i64, Vec<&Execution>> = HashMap::new();
    for e in executions {
        executions_of.entry(e.run_id).or_default().push(e);
    }
    for r in runs.iter().filter(|r| r.outcome == "succeeded") {
        let finished = executions_of.get(&r.id).map_or(0, |es| {
            es.iter().filter(|e| e.finished_at.is_some()).count()
        });
        v.check(finished == 1, || {
            format!(
                "run {} (`{}` at {}) is recorded succeeded but its handler finished {finished} time(s)",
                r.id,
                r.verb,
                t(r.scheduled_at)
            )
        });
    }
}

/// No handler started, or had an effect, after its run was taken back (`abandoned`): a replica that lost
/// its lease must not work on the run any more, since another replica may be running the verb.
pub fn check_no_work_after_takeback(runs: &[Run], executions: &[Execution], v: &mut Violations) {
    let by_id: HashMap<i64, &Run> = runs.iter().map(|r| (r.id, r)).collect();
    for e in executions {
        let Some(r) = by_id.get(&e.run_id) else {
            continue;
        };
        let Some(taken_back) = r.finished_at.filter(|_| r.outcome == "abandoned") else {
            continue;
        };
        v.check(e.last_effect() <= taken_back, || {
            format!(
                "{} worked on run {} (`{}` at {}) after it was taken back at {}: started {}, last \
                 effect {} ({} ticks, finished {}, dropped {})",
                e.replica,
                r.id,
                r.verb,
                t(r.scheduled_at),
                t(taken_back),
                t(e.started_at),
                t(e.last_effect()),
                e.ticks,
                e.finished_at.map_or("-".into(), t),
                e.dropped_at.map_or("-".into(), t),
            )
        });
    }
}

/// One execution's effects happened while another execution of the same verb had started and not yet
/// had its last effect.
#[derive(Debug, Clone)]
pub struct Overlap {
    pub verb: String,
    pub earlier: Execution,
    pub later: Execution,
    /// How long the two intervals intersect.
    pub by: Duration,
}

impl Overlap {
    pub fn describe(&self, runs: &[Run]) -> String {
        let outcome = |run_id: i64| {
            runs.iter()
                .find(|r| r.id == run_id)
                .map_or("?".to_owned(), |r| {
                    format!(
                        "{} finished {}",
                        r.outcome,
                        r.finished_at.map_or("-".into(), t)
                    )
                })
        };
        let e = &self.earlier;
        let l = &self.later;
        format!(
            "`{}` overlapped itself by {} ms: {} ran {} (run {}, {}) from {} to its last effect {} \
             ({} ticks, finished {}, dropped {}); {} ran {} (run {}, {}) from {}",
            self.verb,
            self.by.num_milliseconds(),
            e.replica,
            t(e.scheduled_at),
            e.run_id,
            outcome(e.run_id),
            t(e.started_at),
            t(e.last_effect()),
            e.ticks,
            e.finished_at.map_or("-".into(), t),
            e.dropped_at.map_or("-".into(), t),
            l.replica,
            t(l.scheduled_at),
            l.run_id,
            outcome(l.run_id),
            t(l.started_at),
        )
    }
}

/// Executions of the same verb whose effect intervals `[started_at, last effect]` intersect, across
/// replicas and deployments.
pub fn overlaps(executions: &[Execution]) -> Vec<Overlap> {
    let mut by_verb: BTreeMap<&str, Vec<&Execution>> = BTreeMap::new();
    for e in executions {
        by_verb.entry(&e.verb).or_default().push(e);
    }
    let mut found = Vec::new();
    for (verb, mut list) in by_verb {
        list.sort_by_key(|e| e.started_at);
        for (i, earlier) in list.iter().enumerate() {
            for later in &list[i + 1..] {
                if later.started_at >= earlier.last_effect() {
                    continue;
                }
                found.push(Overlap {
                    verb: verb.to_owned(),
                    earlier: (*earlier).clone(),
                    later: (*later).clone(),
                    by: earlier.last_effect().min(later.last_effect()) - later.started_at,
                });
            }
        }
    }
    found
}

/// For a verb due every second: every whole second of `[from, to]` has a run, or is counted in the
/// `skipped` of the run before it, and consecutive runs agree with their `skipped` counts (the next run is
/// exactly `skipped + 1` seconds later: nothing dropped, nothing counted twice). Returns the accounting,
/// one line per second.
pub fn account_every_second(
    runs: &[Run],
    verb: &str,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    v: &mut Violations,
) -> String {
    let second = Duration::seconds(1);
    let mut rows: Vec<&Run> = runs.iter().filter(|r| r.verb == verb).collect();
    rows.sort_by_key(|r| r.scheduled_at);
    let from = from.duration_trunc(second).expect("a whole second") + second;
    let to = to.duration_trunc(second).expect("a whole second");
    let mut table = String::new();
    let mut missing = 0;
    let mut at = from;
    while at <= to {
        let exact = rows.iter().find(|r| r.scheduled_at == at);
        let covering = rows.iter().rev().find(|r| {
            r.scheduled_at < at && at <= r.scheduled_at + Duration::seconds(i64::from(r.skipped))
        });
        let how = match (exact, covering) {
            (Some(r), None) => format!(
                "run {} {} by {} (skipped {})",
                r.id, r.outcome, r.runner, r.skipped
            ),
            (None, Some(r)) => format!("skipped, counted by run {} ({})", r.id, t(r.scheduled_at)),
            (Some(r), Some(c)) => {
                v.add(format!(
                    "`{verb}` at {}: run {} exists but run {} ({}) counts it as skipped",
                    t(at),
                    r.id,
                    c.id,
                    t(c.scheduled_at)
                ));
                "RUN AND SKIPPED".to_owned()
            }
            (None, None) => {
                missing += 1;
                "MISSING".to_owned()
            }
        };
        let _ = writeln!(table, "  {} {how}", t(at));
        at += second;
    }
    if missing > 0 {
        v.add(format!(
            "`{verb}`: {missing} second(s) of [{}, {}] have neither a run nor a skip; accounting:\n{table}",
            t(from),
            t(to)
        ));
    }
    for pair in rows.windows(2) {
        let (a, b) = (pair[0], pair[1]);
        if b.scheduled_at < from || a.scheduled_at > to {
            continue;
        }
        let expected = a.scheduled_at + Duration::seconds(i64::from(a.skipped) + 1);
        v.check(b.scheduled_at == expected, || {
            format!(
                "`{verb}`: run {} at {} ({}, skipped {}) is followed by run {} at {}, expected {}",
                a.id,
                t(a.scheduled_at),
                a.outcome,
                a.skipped,
                b.id,
                t(b.scheduled_at),
                t(expected)
            )
        });
    }
    table
}

/// Counts of runs by outcome, for the summaries.
pub fn outcomes(runs: &[Run], verb: &str) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for r in runs.iter().filter(|r| r.verb == verb) {
        *counts.entry(r.outcome.clone()).or_default() += 1;
    }
    counts
}

/// The sum of `skipped` over a verb's runs.
pub fn skipped(runs: &[Run], verb: &str) -> i64 {
    runs.iter()
        .filter(|r| r.verb == verb)
        .map(|r| i64::from(r.skipped))
        .sum()
}
