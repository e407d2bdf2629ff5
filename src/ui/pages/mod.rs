//! The UI's pages, one module per page (each with its live fragments and its actions).

pub mod audit;
pub mod bulk_jobs;
pub mod dashboard;
pub mod dead_letters;
pub mod health;
pub mod job;
pub mod keys;
pub mod login;
pub mod queue;
pub mod queue_settings;
pub mod schedules;
pub mod search;
pub mod topic_message;
pub mod topics;
pub mod workers;
