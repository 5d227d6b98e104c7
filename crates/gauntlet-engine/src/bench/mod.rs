//! The measuring core of `gauntlet bench`: metrics from request timelines and the statistics that compare them
//! with a baseline. Pure functions, tested alone; the workload driver and the command are `crate::run::bench`.

pub mod field;
pub mod metrics;
pub mod paired;
pub mod power;
pub mod samples;
#[cfg(test)]
mod scipy_reference;
pub mod stats;
pub mod summary;
