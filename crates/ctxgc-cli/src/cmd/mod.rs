//! One module per subcommand.

pub mod compile;
pub mod diff;
pub mod explain;
pub mod receipt;
