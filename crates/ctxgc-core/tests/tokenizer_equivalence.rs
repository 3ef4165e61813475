//! ctxgc's tokenizer counts exactly what tiktoken counts: on every record of the public corpora
//! (as JSON text and as the text of its string values), on adversarial strings (scripts,
//! marks, emoji, case-folding letters, long runs of one class, whitespace of every kind, digit
//! runs) and on random mixtures of them, for both vocabularies.
//!
//! The corpus is found through `CTXGC_CORPUS`, else `../shared/corpus` beside the repository;
//! without it the corpus test prints a note and passes.

use std::path::PathBuf;

use ctxgc_core::Tokenizer;
use proptest::prelude::*;
use serde_json::Value;
use tiktoken_rs::CoreBPE;

mod common;
use common::corpus_dir;

fn reference(tokenizer: Tokenizer) -> &'static CoreBPE {
    match tokenizer {
        Tokenizer::O200kBase => tiktoken_rs::o200k_base_singleton(),
        Tokenizer::Cl100kBase => tiktoken_rs::cl100k_base_singleton(),
    }
}

const BOTH: [Tokenizer; 2] = [Tokenizer::O200kBase, Tokenizer::Cl100kBase];

fn assert_same(tokenizer: Tokenizer, text: &str, what: &str) {
    let want = reference(tokenizer).encode_ordinary(text).len();
    let got = tokenizer.count(text);
    assert_eq!(
        got,
        want,
        "{} on {what}: {:?}",
        tokenizer.name(),
        text.chars().take(200).collect::<String>()
    );
}

fn strings(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::String(s) => out.push(s.clone()),
        Value::Array(items) => items.iter().for_each(|v| strings(v, out)),
        Value::Object(map) => map.iter().for_each(|(k, v)| {
            out.push(k.clone());
            strings(v, out)
        }),
        _ => {}
    }
}

#[test]
fn corpus_counts_match_tiktoken() {
    let Some(dir) = corpus_dir() else {
        eprintln!("note: corpus not found (set CTXGC_CORPUS); corpus comparison skipped");
        return;
    };
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("corpus directory lists")
        .map(|e| e.expect("corpus entry").path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    assert!(!files.is_empty());
    for path in files {
        let name = path.display().to_string();
        let text = std::fs::read_to_string(&path).expect("corpus file reads");
        for (n, line) in text.lines().enumerate() {
            let at = format!("{name} line {}", n + 1);
            assert_same(Tokenizer::O200kBase, line, &at);
            let Ok(value) = serde_json::from_str::<Value>(line) else {
                continue;
            };
            let mut texts = Vec::new();
            strings(&value, &mut texts);
            for tokenizer in BOTH {
                assert_same(
                    tokenizer,
                    &texts.join("\n"),
                    &format!("{at} (string values)"),
                );
            }
        }
    }
}

fn adversarial() -> Vec<String> {
    let mut cases: Vec<String> = [
        "",
        " ",
        "\n",
        "hello world",
        "Hello, World! It's DON'T we'LL they'Re I'M you'VE she'D",
        "ſ'ſ K'K 'S 'ſ", // letters whose case folds onto s and k
        "日本語のテキストと中文文本，还有한국어 텍스트",
        "emoji 👩‍👩‍👧‍👦🏳️‍🌈 👍🏽 and flags 🇫🇷🇯🇵",
        "e\u{301}e\u{301}\u{302} combining marks, \u{300}\u{301} alone, a\u{200d}b",
        "مرحبا بالعالم שלום עולם",
        "Ελληνικά Кириллица ΣΊΣΥΦΟΣ",
        "12 123 1234 12345 123456 1,234,567.890 ١٢٣٤ ٣.١٤ Ⅻ ½ ²",
        "  leading and trailing  ",
        "a  b   c    d\t\te\t \tf",
        "line\r\nbreaks\n\n\nand\r\r\rmore \n \n\t\n",
        "\u{a0}\u{2003}\u{3000}nbsp em-space ideographic\u{3000}space\u{2028}\u{2029}\u{85}",
        "trailing newline spaces   \n   ",
        "x \n",
        "/path/to/file.rs:12:5 -> fn main() { println!(\"{}\", x); }\n//!\r\n///",
        "{\"key\": [1, 2.5e-10, null, true], \"k2\": \"v\\u00e9\\n\"}",
        "<|endoftext|> <|fim_prefix|> <|endofprompt|>",
        "\u{feff}BOM and \u{fffd} replacement and \u{10ffff} last",
        "CamelCaseIdentifier snake_case_id SCREAMING_CASE mixedUPPERlower ÀÉÎõü",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for unit in [
        "a", " ", "-", "=", "\n", "\t", "1", "日", "👍", "ab ", " \n", "é", ".\n", "/ ", "'s",
    ] {
        for n in [2, 3, 99, 100, 101, 127, 128, 129, 1000, 20_000] {
            cases.push(unit.repeat(n));
        }
    }
    cases.push(format!("{}x", " ".repeat(5000)));
    cases.push(format!("x{}y", "\u{3000}".repeat(300)));
    cases.push("0123456789".repeat(3000));
    cases.push("!@#$%^&*()_+[]{}|;:,.<>?`~".repeat(2000));
    cases
}

#[test]
fn adversarial_counts_match_tiktoken() {
    for text in adversarial() {
        for tokenizer in BOTH {
            assert_same(tokenizer, &text, "adversarial string");
        }
    }
}

fn tricky_char() -> impl Strategy<Value = char> {
    prop::sample::select(vec![
        'a',
        'Z',
        'k',
        's',
        'K',
        '\u{17f}',
        '\u{212a}',
        '\'',
        ' ',
        ' ',
        '\t',
        '\n',
        '\r',
        '\u{a0}',
        '\u{3000}',
        '0',
        '7',
        '\u{661}',
        '.',
        '-',
        '/',
        '_',
        '"',
        '\\',
        '日',
        '한',
        'é',
        '\u{301}',
        '\u{200d}',
        '👍',
        '\u{1f3fd}',
        'Σ',
        'ς',
        'И',
        '<',
        '|',
        '>',
    ])
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn random_mixtures_match_tiktoken(chars in prop::collection::vec(tricky_char(), 0..300)) {
        let text: String = chars.into_iter().collect();
        for tokenizer in BOTH {
            let want = reference(tokenizer).encode_ordinary(&text).len();
            prop_assert_eq!(tokenizer.count(&text), want, "{}: {:?}", tokenizer.name(), text);
        }
    }
}
