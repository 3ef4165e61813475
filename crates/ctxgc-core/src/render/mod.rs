//! Back-ends: render a compiled session into the format the caller needs.

pub mod prompt;
