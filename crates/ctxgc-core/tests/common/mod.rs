//! What the integration tests and benches over the corpus share.
#![allow(dead_code)] // each test file uses some of these

use std::path::{Path, PathBuf};

use ctxgc_core::Options;
use ctxgc_core::chat::{ChatOptions, Preset};
use serde_json::{Value, json};

/// Where the public agent-transcript corpus is read from: `$CTXGC_CORPUS`, else
/// `shared/corpus` beside the checkout (it may be absent).
pub fn corpus_path() -> PathBuf {
    std::env::var_os("CTXGC_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../../shared/corpus"
            ))
        })
}

/// The files in `dir` whose extension is `extension`, sorted.
pub fn files_with_extension(dir: &Path, extension: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == extension))
        .collect();
    files.sort();
    files
}

/// The text of the chat fixture `name` (in tests/fixtures/chat).
pub fn chat_fixture(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/chat")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The TraceGC fixtures bundled with the tests (MIT, see fixtures/tracegc/LICENSE), as
/// (file name, text), by name.
pub fn tracegc_fixtures() -> Vec<(String, String)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tracegc");
    files_with_extension(&dir, "json")
        .into_iter()
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read_to_string(&p).expect("fixture reads"))
        })
        .collect()
}

/// The default options with the chat preset `preset`.
pub fn preset_options(preset: Preset) -> Options {
    Options {
        chat: ChatOptions {
            preset,
            ..Default::default()
        },
        ..Default::default()
    }
}

/// The corpus directory, when it is there.
pub fn corpus_dir() -> Option<PathBuf> {
    let dir = corpus_path();
    dir.is_dir().then_some(dir)
}

/// The text of a corpus file, or `None` (with a note) when the corpus is absent.
pub fn corpus(name: &str) -> Option<String> {
    let dir = corpus_path();
    match std::fs::read_to_string(dir.join(name)) {
        Ok(text) => Some(text),
        Err(_) => {
            eprintln!(
                "note: no corpus at {} (set CTXGC_CORPUS); skipped",
                dir.display()
            );
            None
        }
    }
}

/// A chat with every chat pass at work: repeated lookups (same or changed result), bulky
/// outputs sampled and folded once the agent has answered, and declared facts superseded.
pub fn agent_chat(turns: usize) -> Vec<Value> {
    let mut messages = vec![json!({"role": "system", "content": "You are a support agent."})];
    for t in 0..turns {
        messages.push(json!({"role": "user", "content": format!("Request {t}")}));
        let tool = ["get_order", "list_flights", "read_log"][t % 3];
        let id = format!("call_{t}");
        let version = (t / 3) % 2;
        messages.push(json!({"role": "assistant", "content": "", "tool_calls": [{
            "id": id, "type": "function",
            "function": {"name": tool, "arguments": json!({"id": t % 2}).to_string()}}]}));
        let output = match tool {
            "list_flights" => json!({"flights": (0..40).map(|r| json!({
                "flight": format!("HAT{r:03}"), "price": 100 + r * 7 + version, "seats": r % 9,
                "status": "available"})).collect::<Vec<_>>()})
            .to_string(),
            "read_log" => (0..200)
                .map(|l| format!("line {l}: ok v{version}\n"))
                .collect(),
            _ => {
                let status = ["pending", "shipped"][version];
                json!({"order": t % 2, "status": status}).to_string()
            }
        };
        messages.push(json!({"role": "tool", "tool_call_id": id, "content": output}));
        messages.push(json!({"role": "assistant", "content": format!(
            "Checked {t}.<contextgc-state>{{\"assert\": {{\"order\": \"{}\"}}}}</contextgc-state>",
            t % 4
        )}));
    }
    messages
}

/// The items of [`agent_chat`] with `turns` turns, lowered as one OpenAI chat document.
pub fn agent_chat_items(turns: usize) -> Vec<ctxgc_core::ir::Item> {
    use ctxgc_core::chat::compile::{ChatInput, lower_chat_input};
    let text = Value::Array(agent_chat(turns)).to_string();
    match lower_chat_input(&text, None).expect("the chat lowers") {
        ChatInput::Doc(doc) => doc.items,
        _ => panic!("one document"),
    }
}
