//! What an operator does in memory: pause and resume a verb, and ask for a manual run of it
//! (docs/operations.md, "Pause and resume" and "Manual runs"), with the rules the database stores keep.

use chrono::{DateTime, Utc};

use super::tables::State;
use crate::store::StoreError;

impl State {
    /// The job rows of `verb` of `module`, one per deployment that has it; refused when none has.
    fn rows_of(&self, module: &str, verb: &str) -> Result<Vec<i64>, StoreError> {
        let mut rows: Vec<i64> = self
            .deployments
            .values()
            .filter(|d| &*d.module == module)
            .filter_map(|d| d.jobs.get(verb).copied())
            .collect();
        if rows.is_empty() {
            return Err(StoreError::Invalid(format!(
                "unknown verb `{verb}` in module `{module}`"
            )));
        }
        rows.sort_unstable();
        Ok(rows)
    }

    /// Pauses `verb` in every deployment of `module`: its regular occurrences are not claimed until it
    /// is resumed; a run in flight finishes, and a pending trigger still runs.
    pub(super) fn pause(&mut self, module: &str, verb: &str) -> Result<(), StoreError> {
        for job_id in self.rows_of(module, verb)? {
            let next = self.jobs[&job_id].next_execution;
            self.set_paused(job_id, true, next);
        }
        Ok(())
    }

    /// Resumes `verb` in every deployment of `module` at `now`: an idle row goes on at its first
    /// occurrence after now (the ones that came while it was paused are not run), unless its next
    /// occurrence is still ahead or it holds a pending retry, which keep their instant.
    pub(super) fn resume(
        &mut self,
        module: &str,
        verb: &str,
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        for job_id in self.rows_of(module, verb)? {
            let job = &self.jobs[&job_id];
            if !job.paused {
                continue;
            }
            let next = match job.next_execution {
                _ if job.retrying.is_some() => job.next_execution,
                Some(next) if next > now => Some(next),
                _ => job.spec.schedule.next_after(now),
            };
            self.set_paused(job_id, false, next);
        }
        Ok(())
    }

    /// Asks for one run of `verb` of `module` now, on the active deployment's row: the next claim takes
    /// it as a manual run scheduled at the returned instant (a pending trigger's, when one was already
    /// pending). Refused when the module has no active deployment, when that deployment has no such
    /// verb, and when a run of the verb is in flight under any deployment, unless it is a regular run
    /// claimed ahead that has not started (the trigger is then taken when that run ends).
    pub(super) fn trigger(
        &mut self,
        module: &str,
        verb: &str,
        now: DateTime<Utc>,
    ) -> Result<DateTime<Utc>, StoreError> {
        let Some(active) = self.active_deployment(module) else {
            return Err(StoreError::Invalid(format!(
                "module `{module}` has no active deployment"
            )));
        };
        let Some(&job_id) = active.jobs.get(verb) else {
            return Err(StoreError::Invalid(format!(
                "the active deployment of `{module}` has no verb `{verb}`"
            )));
        };
        let running = self.rows_of(module, verb)?.into_iter().find_map(|id| {
            self.jobs[&id]
                .executing
                .filter(|e| e.manual || e.retry_at.unwrap_or(e.scheduled_at) <= now)
        });
        if let Some(executing) = running {
            return Err(StoreError::Invalid(format!(
                "`{verb}` is executing (run {}); a trigger waits for no run",
                executing.run_id
            )));
        }
        if let Some(pending) = self.jobs[&job_id].trigger {
            return Ok(pending);
        }
        self.set_trigger(job_id, Some(now));
        Ok(now)
    }
}
