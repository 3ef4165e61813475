//! A reader for Python literals (`{'a': None, 'b': [True, 1.5]}`), the form in which many
//! Python tools print their results inside a JSON string. Only literals: dicts, lists,
//! tuples, strings, numbers, `True`, `False`, `None`. Anything else gives `None`.
//!
//! ```
//! use serde_json::json;
//! use ctxgc_core::projection::pylit::parse;
//! assert_eq!(parse("{'a': None, 'b': (True, 'x\\'y')}"), Some(json!({"a": null, "b": [true, "x'y"]})));
//! assert_eq!(parse("{'a': 1"), None);
//! ```

use serde_json::{Map, Value};

/// Nesting deeper than this is refused (no stack exhaustion on hostile input).
const MAX_DEPTH: usize = 128;

/// Parses a whole Python literal; `None` when the text is not one.
pub fn parse(text: &str) -> Option<Value> {
    let mut p = Parser {
        s: text.as_bytes(),
        text,
        i: 0,
    };
    let v = p.value(0)?;
    p.ws();
    (p.i == p.s.len()).then_some(v)
}

struct Parser<'a> {
    s: &'a [u8],
    text: &'a str,
    i: usize,
}

impl Parser<'_> {
    fn ws(&mut self) {
        while self.i < self.s.len() && self.s[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
    }

    fn eat(&mut self, c: u8) -> bool {
        self.ws();
        if self.s.get(self.i) == Some(&c) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    fn value(&mut self, depth: usize) -> Option<Value> {
        if depth > MAX_DEPTH {
            return None;
        }
        self.ws();
        match *self.s.get(self.i)? {
            b'{' => {
                self.i += 1;
                let mut map = Map::new();
                loop {
                    if self.eat(b'}') {
                        return Some(Value::Object(map));
                    }
                    let key = match self.value(depth + 1)? {
                        Value::String(s) => s,
                        Value::Number(n) => n.to_string(),
                        Value::Bool(b) => if b { "True" } else { "False" }.to_owned(),
                        Value::Null => "None".to_owned(),
                        _ => return None,
                    };
                    if !self.eat(b':') {
                        return None;
                    }
                    let v = self.value(depth + 1)?;
                    map.insert(key, v);
                    if !self.eat(b',') {
                        return self.eat(b'}').then_some(Value::Object(map));
                    }
                }
            }
            open @ (b'[' | b'(') => {
                let close = if open == b'[' { b']' } else { b')' };
                self.i += 1;
                let mut items = Vec::new();
                loop {
                    if self.eat(close) {
                        return Some(Value::Array(items));
                    }
                    items.push(self.value(depth + 1)?);
                    if !self.eat(b',') {
                        return self.eat(close).then_some(Value::Array(items));
                    }
                }
            }
            b'\'' | b'"' => self.string(),
            b'-' | b'+' | b'0'..=b'9' | b'.' => self.number(),
            _ => {
                for (word, value) in [
                    ("True", Value::Bool(true)),
                    ("False", Value::Bool(false)),
                    ("None", Value::Null),
                ] {
                    if self.text[self.i..].starts_with(word) {
                        self.i += word.len();
                        return Some(value);
                    }
                }
                None
            }
        }
    }

    fn string(&mut self) -> Option<Value> {
        let quote = self.s[self.i];
        self.i += 1;
        let mut out = String::new();
        let mut run_start = self.i;
        while self.i < self.s.len() {
            let c = self.s[self.i];
            if c == quote {
                out.push_str(&self.text[run_start..self.i]);
                self.i += 1;
                return Some(Value::String(out));
            }
            if c == b'\\' {
                out.push_str(&self.text[run_start..self.i]);
                let esc = *self.s.get(self.i + 1)?;
                self.i += 2;
                match esc {
                    b'n' => out.push('\n'),
                    b't' => out.push('\t'),
                    b'r' => out.push('\r'),
                    b'0' => out.push('\0'),
                    b'\\' => out.push('\\'),
                    b'\'' => out.push('\''),
                    b'"' => out.push('"'),
                    b'x' => out.push(self.hex(2)?),
                    b'u' => out.push(self.hex(4)?),
                    b'U' => out.push(self.hex(8)?),
                    b'\n' => {}
                    _ => {
                        // An unknown escape stays as written, as Python keeps it.
                        out.push('\\');
                        self.i -= 1;
                    }
                }
                run_start = self.i;
                continue;
            }
            self.i += 1;
        }
        None
    }

    fn hex(&mut self, n: usize) -> Option<char> {
        let digits = self.text.get(self.i..self.i + n)?;
        let code = u32::from_str_radix(digits, 16).ok()?;
        self.i += n;
        char::from_u32(code)
    }

    fn number(&mut self) -> Option<Value> {
        let start = self.i;
        while self.i < self.s.len()
            && matches!(
                self.s[self.i],
                b'0'..=b'9' | b'.' | b'-' | b'+' | b'e' | b'E' | b'_'
            )
        {
            self.i += 1;
        }
        let raw: String = self.text[start..self.i]
            .chars()
            .filter(|c| *c != '_' && *c != '+')
            .collect();
        // JSON wants a digit before the dot and after it.
        let mut fixed = raw.replace("-.", "-0.");
        if fixed.starts_with('.') {
            fixed.insert(0, '0');
        }
        if fixed.ends_with('.') {
            fixed.push('0');
        }
        let fixed = fixed.replace(".e", ".0e").replace(".E", ".0E");
        match serde_json::from_str::<Value>(&fixed) {
            Ok(v @ Value::Number(_)) => Some(v),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_nested_literals_and_escapes() {
        assert_eq!(
            parse(
                r#"{'ts': 1.25, 'device_type': None, 'items': [{'t': "it's"}], 'u': '\u00e9\x41'}"#
            ),
            Some(json!({"ts": 1.25, "device_type": null, "items": [{"t": "it's"}], "u": "éA"}))
        );
        assert_eq!(parse("[1, 2,]"), Some(json!([1, 2])));
        assert_eq!(parse("(-.5, 3.)"), Some(json!([-0.5, 3.0])));
    }

    #[test]
    fn refuses_what_is_not_a_literal() {
        assert_eq!(parse("{'a': 1} trailing"), None);
        assert_eq!(parse("{'a': datetime(2020)}"), None);
        assert_eq!(parse("{'unterminated: 1}"), None);
        assert_eq!(parse(&"[".repeat(10_000)), None);
    }
}
