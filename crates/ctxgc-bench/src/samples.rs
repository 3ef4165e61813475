//! Example inputs bundled in the binary, for `ctxgc bench --sample`: copies of the files under
//! `examples/bench/` in the repository (see its README for where each came from and its
//! licence).

/// `(name, contents)` of every bundled example, in a fixed order.
#[rustfmt::skip]
pub const SAMPLES: &[(&str, &str)] = &[
    ("coding_agent_short.json", include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/bench/coding_agent_short.json"))),
    ("customer_support_medium.json", include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/bench/customer_support_medium.json"))),
    ("research_agent_long.json", include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/bench/research_agent_long.json"))),
    ("corpus-sample.jsonl", include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/bench/corpus-sample.jsonl"))),
];

/// The bundled examples as bench inputs, named `sample:NAME`.
pub fn inputs() -> Vec<crate::run::InputFile> {
    SAMPLES
        .iter()
        .map(|(name, text)| crate::run::InputFile {
            path: format!("sample:{name}"),
            text: Ok((*text).to_owned()),
        })
        .collect()
}
