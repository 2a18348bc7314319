//! The store conformance suite: what every store of this crate must do, one `async fn` per behaviour,
//! run against each store by [`every_case!`] (tests/store_memory.rs, tests/store_sqlite.rs,
//! tests/store_postgres.rs).
//! docs/runtime.md ("The store seam") says how a new store joins it.
//!
//! The cases drive a store only through [`Store`] and observe it only through [`StoreUnderTest`]: its
//! clock, its runs and the next occurrence of a job. Time is the store's own: the in-memory store runs on
//! tokio's paused clock, so its waits are instant and its instants exact; PostgreSQL uses the database's
//! clock, so the cases wait for real, in jobs due every second and leases of two seconds, and never
//! assume where in a second they start.

// Each case is used by every store's test binary; the helpers by some cases.
#![allow(dead_code)]

use std::future::Future;
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use cron_runtime::store::{
    Attempt, Change, Claim, Claimed, DeploymentSpec, Finish, Finished, JobSpec, Outcome,
    ReplicaRun, Runner, Store, StoreError, StoreSettings,
};
use cron_schema::{MissedPolicy, Schedule, ZonedSchedule};

use crate::support::schema_of;

mod backfill;
mod cancel;
mod chain;
mod claims;
mod deploys;
mod ending;
mod every_replica;
mod history;
mod jitter;
mod leases;
mod logs;
mod missed;
mod operator;
mod overdue;
mod overrides;
mod records;
mod registration;
mod retries;
mod rows;
mod shutdown;
mod spread;
mod waking;

pub use backfill::*;
pub use cancel::*;
pub use chain::*;
pub use claims::*;
pub use deploys::*;
pub use ending::*;
pub use every_replica::*;
pub use history::*;
pub use jitter::*;
pub use leases::*;
pub use logs::*;
pub use missed::*;
pub use operator::*;
pub use overdue::*;
pub use overrides::*;
pub use records::*;
pub use registration::*;
pub use retries::*;
// The in-memory store's binary has no row cases.
#[allow(unused_imports)]
pub use rows::*;
pub use shutdown::*;
pub use spread::*;
pub use waking::*;

/// A store under test, and what the cases may observe of it besides [`Store`]'s answers.
pub trait StoreUnderTest {
    /// The store.
    type Store: Store + Clone;

    /// Whether the store's heartbeats say when a job is next due and when a held lease ends
    /// ([`Beat`](cron_runtime::store::Beat)). A store that wakes its executor by other means (the
    /// in-memory store: every change in its one process) may leave both out.
    const HEARTBEAT_HINTS: bool;

    /// A handle on the store as another replica (another process) would have it, with these settings,
    /// or why the store refuses them.
    fn with_settings(&self, settings: StoreSettings) -> Result<Self::Store, StoreError>;

    /// [`StoreUnderTest::with_settings`], of settings the store takes.
    fn replica(&self, settings: StoreSettings) -> Self::Store {
        self.with_settings(settings)
            .unwrap_or_else(|e| panic!("settings {settings:?} refused: {e}"))
    }

    /// The store's clock now.
    fn now(&self) -> impl Future<Output = DateTime<Utc>>;

    /// Every run the store keeps, finished or in flight, in the order of their ids.
    fn runs(&self) -> impl Future<Output = Vec<RunView>>;

    /// The next occurrence of `verb` under the active deployment of `module`, while that job is idle;
    /// `None` while it executes, has no next occurrence, or is not a job of the active deployment.
    fn next_execution(
        &self,
        module: &str,
        verb: &str,
    ) -> impl Future<Output = Option<DateTime<Utc>>>;

    /// What an operator acts through on this store: [`Admin`](cron_runtime::admin::Admin) on the
    /// database stores, as the command-line tool does; the store's own methods in memory.
    type Operator: Operator;

    /// The store's operator.
    fn operator(&self) -> Self::Operator;

    /// Asks for one run of `verb` of [`MODULE`] now, as `cronverb trigger` does; the instant the manual
    /// run is scheduled at, or why it was refused.
    fn trigger(&self, verb: &str) -> impl Future<Output = Result<DateTime<Utc>, String>> {
        let operator = self.operator();
        let verb = verb.to_owned();
        async move { operator.trigger(&verb).await }
    }

    /// Pauses `verb` of [`MODULE`], as `cronverb pause` does.
    fn pause(&self, verb: &str) -> impl Future<Output = ()> {
        let operator = self.operator();
        let verb = verb.to_owned();
        async move { operator.pause(&verb).await }
    }

    /// Resumes `verb` of [`MODULE`], as `cronverb resume` does; the next run it reports.
    fn resume(&self, verb: &str) -> impl Future<Output = Option<DateTime<Utc>>> {
        let operator = self.operator();
        let verb = verb.to_owned();
        async move { operator.resume(&verb).await }
    }

    /// Runs `verb` of [`MODULE`] on `expression` instead of its code's, as `cronverb reschedule` does.
    fn reschedule(&self, verb: &str, expression: &str) -> impl Future<Output = Result<(), String>> {
        let operator = self.operator();
        let (verb, expression) = (verb.to_owned(), expression.to_owned());
        async move { operator.reschedule(&verb, &expression).await }
    }

    /// Runs `verb` of [`MODULE`] on its code's schedule again.
    fn reset_schedule(&self, verb: &str) -> impl Future<Output = ()> {
        let operator = self.operator();
        let verb = verb.to_owned();
        async move { operator.reset_schedule(&verb).await }
    }

    /// Backfills `verb` of [`MODULE`] over `[from, to)`, as `cronverb backfill` does.
    fn backfill(
        &self,
        verb: &str,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> impl Future<Output = Result<Vec<DateTime<Utc>>, String>> {
        let operator = self.operator();
        let verb = verb.to_owned();
        async move { operator.backfill(&verb, from, to).await }
    }
}

/// What an operator does to the jobs of [`MODULE`] (docs/operations.md, "Pause and resume" and "Manual
/// runs").
pub trait Operator {
    /// One run of `verb` now: the instant the manual run is scheduled at, or why it was refused.
    fn trigger(&self, verb: &str) -> impl Future<Output = Result<DateTime<Utc>, String>>;

    /// Pauses `verb`.
    fn pause(&self, verb: &str) -> impl Future<Output = ()>;

    /// Resumes `verb`; the next run it reports (`cronverb resume`'s "next run at"), which is never in
    /// the past (docs/operations.md, "Pause and resume").
    fn resume(&self, verb: &str) -> impl Future<Output = Option<DateTime<Utc>>>;

    /// Queues the occurrences of `verb` in `[from, to)` that never ran, as `cronverb backfill` does;
    /// the occurrences queued, or why it was refused (docs/operations.md, "Backfill").
    fn backfill(
        &self,
        verb: &str,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> impl Future<Output = Result<Vec<DateTime<Utc>>, String>>;

    /// Drops the queued occurrences of `verb`, as `cronverb backfill --cancel` does; how many.
    fn cancel_backfill(&self, verb: &str) -> impl Future<Output = u64>;

    /// Asks the run of `verb` in flight to stop, as `cronverb cancel --actor BY --note NOTE` does; the
    /// run asked, or why it was refused (docs/operations.md, "Cancelling a run").
    fn cancel(
        &self,
        verb: &str,
        by: &str,
        note: Option<&str>,
    ) -> impl Future<Output = Result<i64, String>>;

    /// How many rows of the audit trail record `action`; `None` for a store that keeps no trail (the
    /// in-memory store).
    fn audited(&self, action: &str) -> impl Future<Output = Option<usize>>;

    /// Runs `verb` on `expression` (UTC) instead of its code's schedule, as `cronverb reschedule`
    /// does; why it was refused (docs/operations.md, "Changing a schedule without a build").
    fn reschedule(&self, verb: &str, expression: &str) -> impl Future<Output = Result<(), String>>;

    /// Runs `verb` on its code's schedule again, as `cronverb reschedule VERB --reset` does.
    fn reset_schedule(&self, verb: &str) -> impl Future<Output = ()>;
}

/// The database stores' operator: the operator API, written once over every database store.
#[cfg(any(feature = "postgres", feature = "sqlite"))]
impl Operator for cron_runtime::admin::Admin {
    async fn trigger(&self, verb: &str) -> Result<DateTime<Utc>, String> {
        cron_runtime::admin::Admin::trigger(self, verb, Some(MODULE))
            .await
            .map(|triggered| triggered.requested_at)
            .map_err(|e| e.to_string())
    }

    async fn pause(&self, verb: &str) {
        cron_runtime::admin::Admin::pause(self, verb, Some(MODULE), None)
            .await
            .unwrap();
    }

    async fn resume(&self, verb: &str) -> Option<DateTime<Utc>> {
        cron_runtime::admin::Admin::resume(self, verb, Some(MODULE))
            .await
            .unwrap()
            .next_execution
    }

    async fn backfill(
        &self,
        verb: &str,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<Vec<DateTime<Utc>>, String> {
        cron_runtime::admin::Admin::backfill(self, verb, Some(MODULE), from, to, false)
            .await
            .map(|done| done.queued.iter().map(|o| o.scheduled_at).collect())
            .map_err(|e| e.to_string())
    }

    async fn cancel_backfill(&self, verb: &str) -> u64 {
        cron_runtime::admin::Admin::cancel_backfill(self, verb, Some(MODULE))
            .await
            .unwrap()
            .cancelled
    }

    async fn cancel(&self, verb: &str, by: &str, note: Option<&str>) -> Result<i64, String> {
        let actor = cron_runtime::admin::Actor::new(by, cron_runtime::admin::Origin::Cli);
        self.clone()
            .with_actor(actor)
            .cancel(verb, Some(MODULE), note)
            .await
            .map(|cancelled| cancelled.run_id)
            .map_err(|e| e.to_string())
    }

    async fn audited(&self, action: &str) -> Option<usize> {
        let filter = cron_runtime::admin::AuditFilter {
            limit: 1000,
            ..Default::default()
        };
        let rows = cron_runtime::admin::Admin::audit(self, &filter)
            .await
            .unwrap();
        Some(rows.iter().filter(|row| row.action == action).count())
    }

    async fn reschedule(&self, verb: &str, expression: &str) -> Result<(), String> {
        cron_runtime::admin::Admin::reschedule(self, verb, Some(MODULE), expression, None, None)
            .await
            .map(|_| ())
            .map_err(|e| e.to_string())
    }

    async fn reset_schedule(&self, verb: &str) {
        cron_runtime::admin::Admin::reset_schedule(self, verb, Some(MODULE), None)
            .await
            .unwrap();
    }
}

/// A run as every store records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunView {
    pub run_id: i64,
    pub verb: String,
    pub scheduled_at: DateTime<Utc>,
    /// When it was claimed, on the store's clock.
    pub claimed_at: Option<DateTime<Utc>>,
    /// The start the executor reported with its end; while it runs, or ended without that report
    /// (abandoned, cancelled by shutdown), the claim's planned start.
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
    /// `None` while the run is in flight.
    pub outcome: Option<Outcome>,
    pub error: Option<String>,
    /// The name of the runner that claimed it.
    pub runner: String,
    pub skipped: u32,
    /// The attempts of an occurrence tried more than once (docs/runtime.md, "Retries").
    pub attempts: Vec<Attempt>,
    /// A manual run (`cronverb trigger`, or a backfill's).
    pub manual: bool,
    /// A run of a backfilled occurrence (`cronverb backfill`).
    pub backfill: bool,
}

/// Makes one test of each case with `$test`, a macro given the case's name: `$test!(case_name);`.
macro_rules! every_case {
    ($test:ident) => {
        // Registration
        $test!(a_first_registration_activates_its_deployment_and_schedules_after_now);
        $test!(a_key_registered_for_another_module_is_refused);
        $test!(a_key_registered_again_with_other_jobs_is_refused_and_keeps_its_jobs);
        $test!(a_deployment_above_the_job_limit_is_refused_before_anything_is_written);
        // Claims
        $test!(a_claim_takes_due_jobs_once_on_the_stores_clock);
        $test!(a_claim_takes_at_most_its_limit_and_says_more_is_due);
        $test!(a_claim_ahead_takes_a_job_due_within_the_window);
        $test!(racing_replicas_claim_each_job_exactly_once);
        // Missed runs
        $test!(a_late_run_under_missed_once_runs_once_and_counts_what_it_skipped);
        $test!(a_late_job_under_missed_skip_is_recorded_skipped_and_rescheduled);
        $test!(a_job_within_the_tolerance_is_not_late);
        $test!(a_late_job_under_missed_all_runs_every_occurrence_in_its_window_oldest_first);
        $test!(a_catch_up_window_bounds_missed_once);
        $test!(a_missed_run_tolerance_under_twice_the_spreads_grace_is_refused);
        $test!(a_manual_run_under_missed_all_keeps_the_occurrences_that_came_while_it_ran);
        // Jitter
        $test!(a_jittered_occurrence_is_claimed_at_its_start_and_recorded_at_its_instant);
        $test!(a_jittered_occurrence_is_late_from_its_start);
        $test!(a_retry_of_a_jittered_job_starts_at_its_retry_instant);
        $test!(changing_the_jitter_at_a_deploy_runs_no_occurrence_twice);
        $test!(a_finish_chains_a_jittered_occurrence_by_its_start);
        // Overdue
        $test!(an_overdue_occurrence_is_reported_once_across_the_replicas_until_one_succeeds);
        $test!(an_unknown_verb_among_the_expected_shifts_no_other);
        $test!(an_occurrence_reported_before_a_deploy_is_not_reported_again_after_it);
        $test!(an_occurrence_that_succeeded_after_its_span_is_still_reported_once);
        $test!(a_run_still_executing_past_its_span_is_overdue_and_reported_once);
        // Ending runs
        $test!(a_failure_is_recorded_with_its_message_and_the_job_goes_on);
        $test!(a_finish_ends_the_run_when_its_handler_ended_not_when_it_is_recorded);
        $test!(a_finish_records_when_the_handler_started_and_the_claim_when_it_claimed);
        $test!(a_finish_with_the_wrong_run_or_runner_is_fenced);
        $test!(a_batch_records_the_same_as_single_finishes);
        $test!(a_batch_fences_exactly_the_runs_this_runner_no_longer_holds);
        $test!(a_finish_of_a_handler_never_called_records_no_start);
        // Chained finishes
        $test!(a_finish_claims_the_next_occurrence_within_the_horizon_or_leaves_it_to_a_claim);
        $test!(a_finish_leaves_a_late_or_moved_occurrence_to_a_claim);
        // Leases
        $test!(renew_extends_only_the_runs_a_runner_holds);
        $test!(an_expired_lease_is_recovered_and_the_late_finish_is_fenced);
        $test!(a_heartbeat_says_when_a_job_is_next_due_and_when_a_held_lease_ends);
        $test!(a_run_claimed_ahead_holds_its_lease_from_its_instant);
        $test!(a_jobs_own_lease_is_taken_back_after_it_not_after_the_runtimes);
        // Shutdown
        $test!(give_back_returns_runs_that_never_started_to_the_store);
        $test!(deregister_records_cancelled_runs_and_gives_back_the_ones_not_started);
        $test!(deregister_ends_the_runs_it_was_not_told_about);
        $test!(an_occurrence_given_back_after_a_takeover_goes_to_the_active_deployment);
        $test!(a_manual_run_given_back_after_a_takeover_is_pending_under_the_active_deployment);
        $test!(giving_back_and_leaving_wake_the_other_replicas);
        // Deploys
        $test!(a_takeover_waits_for_the_old_deployments_run_and_carries_unchanged_verbs);
        $test!(a_takeover_starts_changed_and_added_verbs_and_stops_removed_ones);
        $test!(a_restarting_old_replica_changes_nothing);
        $test!(after_a_rollback_the_older_deployment_takes_over_by_itself);
        $test!(concurrent_first_replicas_take_over_once);
        $test!(a_run_ending_under_an_inactive_deployment_wakes_the_active_one);
        $test!(a_single_low_frequency_job_ending_under_an_inactive_deployment_goes_on_past_what_it_skipped);
        $test!(a_takeover_is_logged_by_key_on_both_sides);
        $test!(a_takeover_during_a_manual_run_carries_the_regular_occurrence);
        // Retries
        $test!(a_failed_attempt_is_retried_at_its_instant_as_the_same_run);
        $test!(a_retry_due_after_the_next_occurrence_ends_the_occurrence_failed);
        $test!(a_retry_claimed_after_the_next_occurrence_came_is_cut_short);
        $test!(a_retry_claimed_ahead_and_given_back_is_pending_again);
        $test!(a_retry_claimed_ahead_and_given_back_after_a_takeover_is_pending_under_the_active_deployment);
        $test!(a_retry_claimed_ahead_by_a_replaced_deployment_stopping_goes_to_the_active_deployment);
        $test!(a_takeover_carries_a_pending_retry_or_cuts_it_short);
        $test!(a_run_taken_back_with_retries_left_is_retried_as_its_next_attempt);
        $test!(a_run_taken_back_with_no_retries_left_ends_abandoned);
        $test!(a_retry_pending_when_its_replica_stops_stays_pending);
        // Operators
        $test!(a_trigger_runs_once_now_as_a_manual_run_and_leaves_the_schedule_alone);
        $test!(a_manual_run_given_back_before_it_started_is_pending_again);
        $test!(a_paused_job_is_not_claimed_runs_when_triggered_and_resumes_after_now);
        $test!(a_manual_run_ending_before_a_pending_retry_leaves_the_retry_at_its_instant);
        $test!(a_manual_run_ending_after_a_pending_retrys_instant_leaves_the_retry_to_the_claim);
        $test!(a_regular_occurrence_due_with_a_trigger_runs_once_and_takes_the_trigger);
        $test!(a_manual_run_overlapping_the_regular_occurrence_skips_it);
        $test!(a_paused_verb_stays_paused_across_a_takeover);
        $test!(a_pending_trigger_moves_to_the_deployment_that_takes_over);
        $test!(a_trigger_waits_for_a_run_claimed_ahead_that_has_not_started);
        $test!(a_finish_claims_nothing_for_a_verb_paused_while_its_run_executed);
        $test!(a_batch_with_a_manual_run_keeps_the_regular_schedule);
        $test!(a_heartbeat_leaves_out_a_paused_job_and_counts_a_pending_trigger);
        $test!(a_retry_paused_past_its_instant_runs_at_the_resume);
        $test!(a_retry_whose_next_occurrence_came_while_paused_is_cut_short_at_the_resume);
        // Cancelling a run
        $test!(a_cancelled_run_ends_cancelled_by_its_actor_and_is_not_retried);
        $test!(a_cancel_with_no_run_in_flight_is_refused_and_audits_nothing);
        $test!(a_cancelled_run_taken_back_from_its_replica_ends_cancelled_and_is_not_retried);
        $test!(a_cancel_of_an_occurrence_waiting_for_its_retry_ends_it_cancelled);
        $test!(a_jittered_run_claimed_before_its_start_is_not_in_flight_for_a_cancel);
        $test!(a_cancel_made_while_no_one_waits_for_a_change_is_heard_by_the_next_wait);
        $test!(a_retry_claimed_ahead_of_its_instant_is_cancelled_before_it_starts);
        $test!(a_cancelled_retry_whose_next_occurrence_came_goes_on_after_now);
        $test!(a_finish_that_says_cancelled_without_a_request_is_recorded_as_it_says);
        $test!(a_cancelled_retry_claimed_ahead_and_given_back_at_shutdown_ends_cancelled);
        $test!(a_cancelled_regular_run_given_back_before_it_started_ends_cancelled);
        // Backfills
        $test!(a_backfill_queues_what_never_ran_and_runs_it_in_order_as_backfills);
        $test!(a_backfill_waits_for_a_due_regular_occurrence_and_never_overlaps_it);
        $test!(a_backfill_run_twice_repeats_nothing);
        $test!(a_cancelled_backfill_runs_nothing_more);
        $test!(a_backfill_of_too_many_occurrences_is_refused);
        $test!(a_backfill_window_reaching_past_now_is_refused);
        $test!(regular_runs_come_before_backfills_under_the_replicas_cap);
        $test!(a_backfill_of_a_job_under_missed_all_keeps_its_backlog_and_runs_nothing_twice);
        $test!(a_run_ending_while_a_backfill_is_queued_chains_nothing_and_the_claim_takes_the_queue);
        $test!(a_heartbeat_counts_a_queued_backfill_occurrence_of_an_idle_row);
        // What a handler asks of the history
        $test!(the_previous_success_is_the_last_succeeded_occurrence_before_the_runs_own);
        // Waking up
        $test!(a_replica_that_held_nothing_hears_when_a_job_another_one_ran_is_next_due);
        // How work is spread
        $test!(live_replicas_split_the_due_occurrences_and_take_a_silent_ones_past_the_grace);
        $test!(a_replica_whose_heartbeat_stopped_is_counted_out_after_its_lease);
        $test!(a_replica_that_owns_nothing_due_is_told_when_its_claim_may_take_another_ones);
        $test!(an_owner_at_its_cap_leaves_the_rest_of_its_share_to_the_others_past_the_grace);
        $test!(a_draining_replica_gives_its_share_up_at_once);
        $test!(the_others_hear_a_replica_drain_at_once);
        $test!(an_occurrence_whose_owner_died_between_runs_is_taken_by_another_replica_once);
        $test!(the_one_job_of_a_module_moves_to_the_next_replica_each_minute_and_never_runs_twice);
        // Jobs on every replica
        $test!(a_job_on_every_replica_is_registered_never_claimed_nor_triggered);
        $test!(a_pause_of_a_job_on_every_replica_wakes_every_replica_which_reads_it);
        // Schedule overrides
        $test!(an_override_moves_the_next_occurrence_to_the_new_schedule);
        $test!(an_override_survives_a_deploy_of_a_new_key);
        $test!(a_reset_returns_to_the_codes_schedule);
        $test!(a_deploy_that_changes_an_overridden_verbs_expression_runs_the_override_until_reset);
        $test!(an_override_that_does_not_check_is_refused_and_changes_nothing);
        $test!(an_override_of_a_fixed_job_is_refused_and_audits_nothing);
        $test!(a_deploy_that_marks_an_overridden_job_fixed_drops_the_override);
        $test!(the_active_deployments_fixed_row_refuses_an_override_an_older_row_would_take);
        $test!(an_override_to_the_codes_own_schedule_is_a_reset);
        $test!(a_pending_retry_runs_at_its_instant_and_the_next_occurrence_follows_the_override);
        $test!(a_deployment_without_the_verb_drops_its_override_at_its_takeover);
        $test!(a_rollback_while_the_verb_stayed_keeps_its_override);
        $test!(after_an_override_an_occurrence_of_its_schedule_from_before_it_is_not_overdue);
        $test!(a_reschedule_of_a_verb_the_active_deployment_has_not_is_refused);
        $test!(a_rollback_after_the_takeover_that_dropped_the_override_runs_the_codes_schedule);
        $test!(a_reschedule_to_the_active_codes_schedule_resets_every_row_to_its_own_code);
        $test!(a_replica_reports_its_last_runs_of_its_jobs_on_every_replica);
    };
}
pub(crate) use every_case;

/// Makes one test of each case that edits rows as text ([`RowsUnderTest`]), for the database stores.
#[allow(unused_macros)]
macro_rules! every_row_case {
    ($test:ident) => {
        $test!(a_bad_text_on_two_rows_is_reported_once_per_row_and_both_are_left_alone);
        $test!(a_row_edited_by_hand_to_another_schedule_is_reported_once_and_wins);
        $test!(a_row_put_back_on_an_occurrence_that_ran_is_moved_past_it);
        $test!(a_bad_row_is_never_reported_due);
        $test!(a_job_on_every_replica_given_an_occurrence_by_hand_is_never_claimed);
        $test!(an_executing_row_whose_run_is_not_recorded_is_taken_back_when_its_lease_expires);
        $test!(an_unrecorded_run_of_a_job_with_retries_is_taken_back_with_no_retry);
    };
}
#[allow(unused_imports)]
pub(crate) use every_row_case;

// ---------------------------------------------------------------------------------------------------
// Jobs and deployments

/// Due every second: the cases' unit of time.
pub const SECONDLY: &str = "* * * * * *";
/// Due every ten seconds: room for a retry, or a manual run, before the next occurrence.
pub const TEN_SECONDLY: &str = "*/10 * * * * *";
/// Never due while a case runs (the cases take seconds, not a year).
pub const YEARLY: &str = "0 0 1 1 *";
/// The module of [`deployment`].
pub const MODULE: &str = "billing";

pub fn zoned(expression: &str) -> ZonedSchedule {
    ZonedSchedule::utc(Schedule::parse(expression).unwrap())
}

pub use crate::support::job;

pub fn skipping(mut job: JobSpec) -> JobSpec {
    job.missed = MissedPolicy::Skip;
    job
}

/// A deployment of [`MODULE`].
pub fn deployment(key: &str, jobs: Vec<JobSpec>) -> DeploymentSpec {
    DeploymentSpec {
        key: key.to_owned(),
        module: MODULE.to_owned(),
        schema: schema_of(MODULE, &jobs),
        jobs,
    }
}

/// The runtime's default settings: a 30 s lease, a 60 s missed-run tolerance.
pub fn defaults() -> StoreSettings {
    StoreSettings::default()
}

/// A lease of two seconds: a replica that stops renewing loses its runs within a case.
pub fn short_lease() -> StoreSettings {
    StoreSettings {
        lease: Duration::from_secs(2),
        ..StoreSettings::default()
    }
}

/// A missed-run tolerance of one second: a job left unclaimed for two seconds is late.
pub fn short_tolerance() -> StoreSettings {
    StoreSettings {
        missed_tolerance: Duration::from_secs(1),
        ..StoreSettings::default()
    }
}

/// A replica with `settings`, registered.
pub async fn replica_with<H: StoreUnderTest>(
    h: &H,
    settings: StoreSettings,
    spec: &DeploymentSpec,
) -> (H::Store, Runner) {
    let store = h.replica(settings);
    let runner = store.register(spec).await.unwrap();
    (store, runner)
}

/// A replica with the default settings, registered.
pub async fn replica<H: StoreUnderTest>(h: &H, spec: &DeploymentSpec) -> (H::Store, Runner) {
    replica_with(h, defaults(), spec).await
}

// ---------------------------------------------------------------------------------------------------
// Time

pub fn ms(millis: i64) -> TimeDelta {
    TimeDelta::milliseconds(millis)
}

/// A little more than the grace after which any replica takes an occurrence that another live replica
/// owns (half a second; docs/runtime.md, "How work is spread"): a case whose second replica must take
/// an occurrence, whoever owns it, claims this long after its start.
pub fn past_the_grace() -> TimeDelta {
    ms(600)
}

/// The first whole second strictly after `at`: the next occurrence of a [`SECONDLY`] job.
pub fn next_second(at: DateTime<Utc>) -> DateTime<Utc> {
    DateTime::from_timestamp(at.timestamp() + 1, 0).unwrap()
}

/// The number of whole seconds from `from` to `to`.
pub fn seconds_between(from: DateTime<Utc>, to: DateTime<Utc>) -> u32 {
    u32::try_from((to - from).num_seconds()).unwrap()
}

/// Waits until the store's clock reads `at` or later.
pub async fn sleep_until<H: StoreUnderTest>(h: &H, at: DateTime<Utc>) {
    loop {
        let now = h.now().await;
        if now >= at {
            return;
        }
        tokio::time::sleep((at - now).to_std().unwrap()).await;
    }
}

/// Waits until the store's clock is a tenth of a second past a whole second for which `second` holds;
/// returns that second. A case that starts there has most of a second before anything is due.
pub async fn settle_where<H: StoreUnderTest>(h: &H, second: impl Fn(i64) -> bool) -> DateTime<Utc> {
    let now = h.now().await;
    let floor = DateTime::from_timestamp(now.timestamp(), 0).unwrap();
    let mut at = if now - floor < ms(200) {
        floor
    } else {
        floor + TimeDelta::seconds(1)
    };
    while !second(at.timestamp()) {
        at += TimeDelta::seconds(1);
    }
    sleep_until(h, at + ms(100)).await;
    at
}

/// [`settle_where`] at any second.
pub async fn settle<H: StoreUnderTest>(h: &H) -> DateTime<Utc> {
    settle_where(h, |_| true).await
}

// ---------------------------------------------------------------------------------------------------
// Claims and finishes

/// Claims what is due now.
pub async fn claim<S: Store>(store: &S, runner: &Runner) -> Claimed {
    store.claim_due(runner, Duration::ZERO, 100).await.unwrap()
}

/// Claims what is due within a second.
pub async fn claim_ahead<S: Store>(store: &S, runner: &Runner) -> Claimed {
    store
        .claim_due(runner, Duration::from_secs(1), 100)
        .await
        .unwrap()
}

pub fn claim_of<'a>(claimed: &'a Claimed, verb: &str) -> &'a Claim {
    claimed
        .claims
        .iter()
        .find(|c| c.verb == verb)
        .unwrap_or_else(|| panic!("`{verb}` was not claimed: {claimed:?}"))
}

pub fn verbs(claimed: &Claimed) -> Vec<&str> {
    claimed.claims.iter().map(|c| c.verb.as_str()).collect()
}

pub fn ended(claim: &Claim, outcome: Outcome, error: Option<&str>) -> Finish {
    Finish {
        run_id: claim.run_id,
        job_id: claim.job_id,
        outcome,
        error: error.map(str::to_owned),
        ended_at: None,
        started_at: None,
        retry_after: None,
    }
}

/// A replica of `spec` whose first attempt of `verb`, claimed at its instant, failed asking for a retry
/// `after` it: the replica, the attempt's claim and the retry's instant.
pub async fn failed_awaiting_its_retry<H: StoreUnderTest>(
    h: &H,
    spec: &DeploymentSpec,
    verb: &str,
    after: Duration,
) -> (H::Store, Runner, Claim, DateTime<Utc>) {
    let (store, runner) = replica(h, spec).await;
    let at = h.next_execution(MODULE, verb).await.unwrap();
    sleep_until(h, at + ms(50)).await;
    let claimed = claim(&store, &runner).await;
    let run = claim_of(&claimed, verb).clone();
    let finish = Finish {
        retry_after: Some(after),
        ..ended(&run, Outcome::Failed, Some("relay refused"))
    };
    let Finished::Retrying { at: retry_at } = finish_one(&store, &runner, &finish).await else {
        panic!("a retry was asked for")
    };
    (store, runner, run, retry_at)
}

pub fn succeeded(claim: &Claim) -> Finish {
    ended(claim, Outcome::Succeeded, None)
}

/// Records one run, with no chained claim.
pub async fn finish_one<S: Store>(store: &S, runner: &Runner, finish: &Finish) -> Finished {
    store
        .finish(runner, std::slice::from_ref(finish), None)
        .await
        .single()
        .unwrap()
}

/// Records runs in one call, with no chained claim.
pub async fn finish_all<S: Store>(
    store: &S,
    runner: &Runner,
    finishes: &[Finish],
) -> Vec<Finished> {
    store
        .finish(runner, finishes, None)
        .await
        .results
        .into_iter()
        .map(Result::unwrap)
        .collect()
}

pub async fn run_of<H: StoreUnderTest>(h: &H, run_id: i64) -> Option<RunView> {
    h.runs().await.into_iter().find(|r| r.run_id == run_id)
}

// ---------------------------------------------------------------------------------------------------
// Wake-ups

/// Lets wake-ups already sent arrive and forgets them.
pub async fn drain<S: Store>(store: &S) {
    while tokio::time::timeout(Duration::from_millis(200), store.changed())
        .await
        .is_ok()
    {}
}

/// Runs `action` while `store.changed()` waits, and returns what it reported, or `None` when nothing
/// woke it within five seconds. The wait starts before the action, so that a store that wakes only the
/// waiters it has then (the in-memory store) is held to it too.
pub async fn woken_by<S: Store, T>(
    store: &S,
    action: impl Future<Output = T>,
) -> (T, Option<Change>) {
    drain(store).await;
    let waiting = store.changed();
    tokio::pin!(waiting);
    assert!(
        tokio::time::timeout(Duration::from_millis(100), &mut waiting)
            .await
            .is_err(),
        "woken before anything happened"
    );
    let result = action.await;
    let change = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .ok();
    (result, change)
}

/// The verbs of the runs a heartbeat took back, in its order.
pub fn recovered_verbs(beat: &cron_runtime::store::Beat) -> Vec<&str> {
    beat.recovered.iter().map(|r| r.verb.as_str()).collect()
}
