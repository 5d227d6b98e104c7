//! The measuring core of `gauntlet bench`: metrics from request timelines and the statistics that compare them
//! with a baseline. (The workload driver and the command come later; these are pure functions, tested alone.)

pub mod metrics;
pub mod stats;
