//! The examples compiled into the binary (the repository's `examples/` folder).

/// A bundled input.
#[derive(Debug)]
pub struct Example {
    /// The file name.
    pub name: &'static str,
    /// What it is.
    pub title: &'static str,
    /// Its text.
    pub text: &'static str,
}

/// Every bundled example.
pub const EXAMPLES: &[Example] = &[
    Example {
        name: "support-session.json",
        title: "Airline support chat (OpenAI messages)",
        text: include_str!("../../../examples/support-session.json"),
    },
    Example {
        name: "coding-session.jsonl",
        title: "Coding agent trace (events)",
        text: include_str!("../../../examples/coding-session.jsonl"),
    },
];
