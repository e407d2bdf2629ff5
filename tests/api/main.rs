//! hookq's integration tests: one test binary, real HTTP on port 0, real receiver servers
//! standing in for workers. See `helpers` for the harness.

#[path = "../build_identity.rs"]
mod build_identity;
#[path = "../skipped.rs"]
mod skipped;

mod activity_history;
mod audit;
mod auth;
mod bad_inputs;
mod batch;
mod breaker;
mod browser;
mod bulk_jobs;
mod cli;
mod connections;
mod credentials;
mod delivery;
mod delivery_log;
mod dlq;
mod dlq_support;
mod egress;
mod events;
mod faults;
mod first_hour;
mod forq;
mod helpers;
mod idempotency;
mod job_life;
mod jobs;
mod keys;
mod leases_view;
mod maintenance;
mod master_key;
mod observability;
mod openapi;
mod operator_cli;
mod ordering;
mod origin;
mod otel;
mod overload;
mod postgres;
mod postgres_admin;
mod postgres_cluster;
mod pull;
mod queue_settings;
mod queues;
mod recovery;
mod schedules;
mod scheduling;
mod search;
mod series;
mod standard_webhooks;
mod state_machine;
mod topics;
mod ui;
mod ui_audit;
mod ui_browser;
mod ui_bulk_jobs;
mod ui_charts;
mod ui_dashboard;
mod ui_dead_letter_figures;
mod ui_job_page;
mod ui_search;
mod ui_second_pass;
mod ui_topics;
mod ui_workers;

/// Prints this binary's build, for `suite_on_postgres`: it runs the `api` binary of its own
/// build and asks each candidate with this test.
#[test]
fn build_identity() {
    let identity = build_identity::identity();
    assert!(!identity.contains('\n'), "one line: {identity}");
    println!("{}{identity}", build_identity::MARKER);
}
