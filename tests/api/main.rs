//! hookq's integration tests: one test binary, real HTTP on port 0, real receiver servers
//! standing in for workers. See `helpers` for the harness.

mod auth;
mod bad_inputs;
mod batch;
mod breaker;
mod browser;
mod cli;
mod delivery;
mod delivery_log;
mod dlq;
mod dlq_support;
mod events;
mod faults;
mod helpers;
mod idempotency;
mod jobs;
mod keys;
mod maintenance;
mod master_key;
mod observability;
mod openapi;
mod operator_cli;
mod ordering;
mod overload;
mod postgres;
mod postgres_admin;
mod postgres_cluster;
mod queue_settings;
mod queues;
mod recovery;
mod schedules;
mod scheduling;
mod state_machine;
mod ui;
mod ui_browser;
