//! Back-ends: render a compiled session into the format the caller needs.

pub mod messages;
pub mod prompt;
