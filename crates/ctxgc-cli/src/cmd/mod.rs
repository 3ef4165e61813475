//! One module per subcommand.

pub mod bench;
pub mod bench_gateway;
pub mod compile;
pub mod diff;
pub mod explain;
pub mod gateway;
pub mod learn;
pub mod measure;
pub mod proxy;
pub mod receipt;
pub mod report;
pub mod serve;
pub mod session;
pub mod session_chat;
pub mod trim;
