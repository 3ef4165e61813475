//! The normalisers through which a value is recognised when it reappears: text is read as a
//! sequence of canonical *words*, the same way for a tool's output values and for what the
//! agent writes later, so that matching is a plain comparison of word sequences.
//!
//! - **case, accents and whitespace**: `Mia  LI` and `mia li` are the same words; common
//!   Latin accents fold (`Calédonienne` = `caledonienne`); punctuation separates words;
//! - **numbers**: thousands separators and trailing zeros go (`1,234.50` = `1234.5`,
//!   `255.0` = `255`); codes with leading zeros (`0036590`) keep them;
//! - **dates**: ISO (`2024-05-20`, with or without a time), `5/20/2024`, `May 20, 2024`,
//!   `20 May 2024`, `May 20th` (no year: matches any year) all become one date word;
//! - **times**: `15:00:00`, `3:00 PM`, `3 pm` is not a time (a bare number), `15:00` is;
//! - a value *inside a longer string* matches because matching looks for the value's word
//!   sequence anywhere within the longer text's words.
//!
//! ```
//! use ctxgc_core::projection::words::canonical_words;
//! assert_eq!(canonical_words("Total: $1,234.50 on May 20th, 2024 at 3:05 pm"),
//!            ["total", "1234.5", "on", "date:2024-05-20", "at", "time:15:05"]);
//! ```

/// The canonical words of a text.
pub fn canonical_words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for_each_word(text, &mut |w| out.push(w));
    out
}

/// Calls `emit` with each canonical word of `text`, in order.
pub fn for_each_word(text: &str, emit: &mut dyn FnMut(String)) {
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if !is_word_char(c) {
            i += 1;
            continue;
        }
        if let Some((end, words)) = date_or_time_at(&chars, i) {
            for w in words {
                emit(w);
            }
            i = end;
            continue;
        }
        if c.is_ascii_digit()
            && let Some((end, number)) = number_at(&chars, i)
        {
            emit(number);
            i = end;
            continue;
        }
        let start = i;
        while i < chars.len() && is_word_char(chars[i]) {
            i += 1;
        }
        let mut word = String::with_capacity(i - start);
        for &ch in &chars[start..i] {
            push_folded(&mut word, ch);
        }
        emit(word);
    }
}

/// Letters, digits and `_` make words; everything else separates them.
pub fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

fn push_folded(out: &mut String, c: char) {
    let folded = match c {
        'À'..='Å' | 'à'..='å' | 'Ā' | 'ā' | 'Ă' | 'ă' | 'Ą' | 'ą' => 'a',
        'Ç' | 'ç' | 'Ć' | 'ć' | 'Č' | 'č' => 'c',
        'È'..='Ë' | 'è'..='ë' | 'Ē' | 'ē' | 'Ė' | 'ė' | 'Ę' | 'ę' | 'Ě' | 'ě' => 'e',
        'Ì'..='Ï' | 'ì'..='ï' | 'Ī' | 'ī' | 'Į' | 'į' | 'İ' | 'ı' => 'i',
        'Ñ' | 'ñ' | 'Ń' | 'ń' | 'Ň' | 'ň' => 'n',
        'Ò'..='Ö' | 'Ø' | 'ò'..='ö' | 'ø' | 'Ō' | 'ō' | 'Ő' | 'ő' => 'o',
        'Ù'..='Ü' | 'ù'..='ü' | 'Ū' | 'ū' | 'Ů' | 'ů' | 'Ű' | 'ű' => 'u',
        'Ý' | 'ý' | 'ÿ' | 'Ÿ' => 'y',
        'Ś' | 'ś' | 'Š' | 'š' | 'Ş' | 'ş' => 's',
        'Ź' | 'ź' | 'Ż' | 'ż' | 'Ž' | 'ž' => 'z',
        'Ł' | 'ł' => 'l',
        'Ř' | 'ř' => 'r',
        'Ť' | 'ť' => 't',
        'Ď' | 'ď' => 'd',
        'ß' => {
            out.push_str("ss");
            return;
        }
        other => {
            out.extend(other.to_lowercase());
            return;
        }
    };
    out.push(folded);
}

fn digits_at(chars: &[char], i: usize, min: usize, max: usize) -> Option<(usize, u32)> {
    let mut j = i;
    let mut value: u32 = 0;
    while j < chars.len() && j - i < max && chars[j].is_ascii_digit() {
        value = value * 10 + chars[j].to_digit(10).unwrap_or(0);
        j += 1;
    }
    if j - i < min || (j < chars.len() && chars[j].is_ascii_digit()) {
        return None;
    }
    Some((j, value))
}

fn boundary_after(chars: &[char], j: usize) -> bool {
    chars.get(j).is_none_or(|c| !is_word_char(*c))
}

fn date_word(year: Option<u32>, month: u32, day: u32) -> Option<String> {
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) {
        return None;
    }
    Some(match year {
        Some(y) => format!("date:{y:04}-{month:02}-{day:02}"),
        None => format!("md:{month:02}-{day:02}"),
    })
}

fn time_word(hour: u32, minute: u32) -> Option<String> {
    (hour < 24 && minute < 60).then(|| format!("time:{hour:02}:{minute:02}"))
}

const MONTHS: [&str; 12] = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
];

/// A month name (full, or its first three letters, `sept` too) at `i`; its number and end.
fn month_at(chars: &[char], i: usize) -> Option<(usize, u32)> {
    let mut j = i;
    while j < chars.len() && chars[j].is_alphabetic() {
        j += 1;
    }
    let word: String = chars[i..j].iter().flat_map(|c| c.to_lowercase()).collect();
    if word.len() < 3 {
        return None;
    }
    let month = MONTHS.iter().position(|m| {
        *m == word
            || (word.len() == 3 && m.starts_with(&word))
            || (word == "sept" && *m == "september")
    })?;
    if chars.get(j) == Some(&'.') {
        j += 1;
    }
    Some((j, month as u32 + 1))
}

fn skip_spaces(chars: &[char], mut j: usize) -> usize {
    while j < chars.len() && (chars[j] == ' ' || chars[j] == '\t' || chars[j] == '\u{a0}') {
        j += 1;
    }
    j
}

/// A day of the month with an optional ordinal suffix (`20`, `20th`).
fn day_at(chars: &[char], i: usize) -> Option<(usize, u32)> {
    let (mut j, day) = digits_at(chars, i, 1, 2)?;
    let rest: String = chars[j..chars.len().min(j + 2)]
        .iter()
        .flat_map(|c| c.to_lowercase())
        .collect();
    if matches!(rest.as_str(), "st" | "nd" | "rd" | "th") {
        j += 2;
    }
    boundary_after(chars, j).then_some((j, day))
}

fn year_at(chars: &[char], i: usize) -> Option<(usize, u32)> {
    let (j, year) = digits_at(chars, i, 4, 4)?;
    (boundary_after(chars, j) && (1000..=2999).contains(&year)).then_some((j, year))
}

/// `H:MM`, `HH:MM`, `HH:MM:SS(.fff)`, with an optional am/pm.
fn time_at(chars: &[char], i: usize) -> Option<(usize, String)> {
    let (j, mut hour) = digits_at(chars, i, 1, 2)?;
    if chars.get(j) != Some(&':') {
        return None;
    }
    let (mut j, minute) = digits_at(chars, j + 1, 2, 2)?;
    if chars.get(j) == Some(&':')
        && let Some((k, _)) = digits_at(chars, j + 1, 2, 2)
    {
        j = k;
        if chars.get(j) == Some(&'.')
            && let Some((k, _)) = digits_at(chars, j + 1, 1, 9)
        {
            j = k;
        }
    }
    let k = skip_spaces(chars, j);
    let meridiem: String = chars[k..chars.len().min(k + 4)]
        .iter()
        .flat_map(|c| c.to_lowercase())
        .filter(|c| *c != '.')
        .collect();
    let (pm, am) = (meridiem.starts_with("pm"), meridiem.starts_with("am"));
    if (pm || am) && hour <= 12 {
        // Consume "pm", "p.m." and the like.
        let mut end = k;
        let mut letters = 0;
        while end < chars.len() && letters < 2 && (chars[end].is_alphabetic() || chars[end] == '.')
        {
            if chars[end].is_alphabetic() {
                letters += 1;
            }
            end += 1;
        }
        if chars.get(end) == Some(&'.') {
            end += 1;
        }
        if boundary_after(chars, end) {
            j = end;
            if pm && hour < 12 {
                hour += 12;
            } else if am && hour == 12 {
                hour = 0;
            }
        }
    }
    if !boundary_after(chars, j) && !matches!(chars.get(j), Some('Z' | 'z')) {
        return None;
    }
    Some((j, time_word(hour, minute)?))
}

/// A date or a time starting at `i`, with the words it becomes.
fn date_or_time_at(chars: &[char], i: usize) -> Option<(usize, Vec<String>)> {
    if chars[i].is_ascii_digit() {
        // 2024-05-20 (or 2024/05/20), with an optional time.
        if let Some((j, year)) = digits_at(chars, i, 4, 4)
            && matches!(chars.get(j), Some('-' | '/'))
        {
            let sep = chars[j];
            if let Some((k, month)) = digits_at(chars, j + 1, 1, 2)
                && chars.get(k) == Some(&sep)
                && let Some((mut end, day)) = digits_at(chars, k + 1, 1, 2)
                && let Some(date) = date_word(Some(year), month, day)
            {
                let mut words = vec![date];
                if matches!(chars.get(end), Some('T' | 't' | ' '))
                    && let Some((tend, time)) = time_at(chars, end + 1)
                {
                    words.push(time);
                    end = tend;
                    // A zone: Z, +02:00, -0500.
                    if matches!(chars.get(end), Some('Z' | 'z')) {
                        end += 1;
                    } else if matches!(chars.get(end), Some('+' | '-'))
                        && let Some((zend, _)) = digits_at(chars, end + 1, 2, 2)
                    {
                        end = zend;
                        if chars.get(end) == Some(&':')
                            && let Some((z2, _)) = digits_at(chars, end + 1, 2, 2)
                        {
                            end = z2;
                        } else if let Some((z2, _)) = digits_at(chars, end, 2, 2) {
                            end = z2;
                        }
                    }
                }
                if boundary_after(chars, end) {
                    return Some((end, words));
                }
            }
        }
        // 5/20/2024 (month first unless the first number cannot be a month), 20/5/24.
        if let Some((j, a)) = digits_at(chars, i, 1, 2)
            && chars.get(j) == Some(&'/')
            && let Some((k, b)) = digits_at(chars, j + 1, 1, 2)
            && chars.get(k) == Some(&'/')
            && let Some((end, y)) = digits_at(chars, k + 1, 2, 4)
            && end - (k + 1) != 3
            && boundary_after(chars, end)
        {
            let year = if y < 100 { 2000 + y } else { y };
            let (month, day) = if a > 12 { (b, a) } else { (a, b) };
            if let Some(date) = date_word(Some(year), month, day) {
                return Some((end, vec![date]));
            }
        }
        // 20 May 2024, 20th of May.
        if let Some((j, day)) = day_at(chars, i) {
            let mut k = skip_spaces(chars, j);
            let lower: String = chars[k..chars.len().min(k + 3)]
                .iter()
                .flat_map(|c| c.to_lowercase())
                .collect();
            if lower == "of " {
                k = skip_spaces(chars, k + 3);
            }
            if k > j
                && let Some((mend, month)) = month_at(chars, k)
                && boundary_after(chars, mend)
            {
                let (end, year) = year_after(chars, mend);
                if let Some(date) = date_word(year, month, day) {
                    return Some((end, vec![date]));
                }
            }
        }
        if let Some((end, time)) = time_at(chars, i) {
            return Some((end, vec![time]));
        }
        return None;
    }
    // May 20, 2024 / May 20th / Sept. 3
    if chars[i].is_alphabetic()
        && let Some((mend, month)) = month_at(chars, i)
    {
        let k = skip_spaces(chars, mend);
        if k > mend
            && let Some((dend, day)) = day_at(chars, k)
        {
            let (end, year) = year_after(chars, dend);
            if let Some(date) = date_word(year, month, day) {
                return Some((end, vec![date]));
            }
        }
    }
    None
}

/// An optional `, 2024` or ` 2024` after a day or month.
fn year_after(chars: &[char], j: usize) -> (usize, Option<u32>) {
    let mut k = j;
    if chars.get(k) == Some(&',') {
        k += 1;
    }
    let k2 = skip_spaces(chars, k);
    if k2 > j
        && let Some((end, year)) = year_at(chars, k2)
    {
        return (end, Some(year));
    }
    (j, None)
}

/// A number at `i` (which holds a digit), canonical: no thousands separators, no trailing
/// fractional zeros. `None` when the digits run into letters (`10am`, `HAT069` is a word).
fn number_at(chars: &[char], i: usize) -> Option<(usize, String)> {
    let mut j = i;
    let mut int_part = String::new();
    while j < chars.len() && chars[j].is_ascii_digit() {
        int_part.push(chars[j]);
        j += 1;
    }
    // Thousands groups: 1,234,567 (only when every group has three digits).
    if int_part.len() <= 3 {
        let mut k = j;
        let mut grouped = int_part.clone();
        let mut groups = 0;
        while chars.get(k) == Some(&',')
            && let Some((end, _)) = digits_at(chars, k + 1, 3, 3)
        {
            grouped.extend(&chars[k + 1..end]);
            k = end;
            groups += 1;
        }
        if groups > 0 {
            int_part = grouped;
            j = k;
        }
    }
    let mut frac = String::new();
    if chars.get(j) == Some(&'.') && chars.get(j + 1).is_some_and(|c| c.is_ascii_digit()) {
        let mut k = j + 1;
        while k < chars.len() && chars[k].is_ascii_digit() {
            frac.push(chars[k]);
            k += 1;
        }
        j = k;
    }
    if !boundary_after(chars, j) {
        return None;
    }
    Some((j, canonical_number(&int_part, &frac)))
}

fn canonical_number(int_part: &str, frac: &str) -> String {
    let frac = frac.trim_end_matches('0');
    if frac.is_empty() && int_part.len() > 1 && int_part.starts_with('0') {
        // A code such as 0036590 or 007: the zeros are part of it.
        return int_part.to_owned();
    }
    let int = int_part.trim_start_matches('0');
    let int = if int.is_empty() { "0" } else { int };
    if frac.is_empty() {
        int.to_owned()
    } else {
        format!("{int}.{frac}")
    }
}

/// Words that say nothing on their own: they never count as a value reappearing. Common
/// English words, and the words tools use for states (`available`, `pending`, `active`).
const STOPWORDS: &[&str] = &[
    "the",
    "and",
    "for",
    "are",
    "but",
    "not",
    "you",
    "all",
    "any",
    "can",
    "had",
    "her",
    "was",
    "one",
    "our",
    "out",
    "has",
    "him",
    "his",
    "how",
    "its",
    "may",
    "new",
    "now",
    "old",
    "see",
    "two",
    "way",
    "who",
    "did",
    "get",
    "got",
    "let",
    "say",
    "she",
    "too",
    "use",
    "yes",
    "yet",
    "off",
    "own",
    "per",
    "via",
    "than",
    "that",
    "this",
    "with",
    "from",
    "have",
    "they",
    "will",
    "would",
    "there",
    "their",
    "what",
    "when",
    "where",
    "which",
    "while",
    "your",
    "yours",
    "been",
    "were",
    "also",
    "into",
    "only",
    "just",
    "some",
    "such",
    "them",
    "then",
    "these",
    "those",
    "very",
    "each",
    "both",
    "more",
    "most",
    "other",
    "over",
    "same",
    "about",
    "after",
    "before",
    "again",
    "here",
    "none",
    "null",
    "true",
    "false",
    "nil",
    "undefined",
    "n_a",
    "okay",
    "done",
    "like",
    "need",
    "does",
    "should",
    "could",
    "must",
    "shall",
    "being",
    "because",
    "onto",
    "upon",
    "under",
    "above",
    "below",
    "between",
    "through",
    "every",
    "many",
    "much",
    "few",
    "less",
    "least",
    "sure",
    "thank",
    "thanks",
    "please",
    "hello",
    "ok",
    "yeah",
    "nope",
    "well",
    "make",
    "made",
    "take",
    "want",
    "know",
    "help",
    "time",
    "day",
    "days",
    "year",
    "years",
    "number",
    "total",
    "value",
    "values",
    "type",
    "name",
    "data",
    "item",
    "items",
    "result",
    "results",
    "info",
    "information",
    "details",
    "detail",
    "list",
    "status",
    "error",
    "errors",
    "message",
    "success",
    "successful",
    "successfully",
    "failed",
    "failure",
    "unknown",
    "default",
    "empty",
    "first",
    "last",
    "next",
    "previous",
    "current",
    "amount",
    "available",
    "unavailable",
    "active",
    "inactive",
    "enabled",
    "disabled",
    "open",
    "closed",
    "pending",
    "confirmed",
    "complete",
    "completed",
    "ready",
    "valid",
    "invalid",
    "found",
    "missing",
    "no",
    "good",
    "great",
    "fine",
    "best",
    "better",
    "high",
    "low",
    "medium",
    "small",
    "large",
    "big",
    "long",
    "short",
    "full",
    "free",
    "paid",
    "different",
    "another",
    "right",
    "left",
    "top",
    "bottom",
    "early",
    "late",
    "today",
    "tomorrow",
    "yesterday",
    "week",
    "month",
    "morning",
    "evening",
    "night",
    "soon",
    "later",
    "able",
    "across",
    "actually",
    "add",
    "added",
    "already",
    "always",
    "among",
    "anything",
    "around",
    "ask",
    "asked",
    "back",
    "based",
    "become",
    "began",
    "call",
    "called",
    "came",
    "case",
    "change",
    "changed",
    "check",
    "checked",
    "come",
    "comes",
    "doing",
    "down",
    "during",
    "either",
    "else",
    "enough",
    "even",
    "ever",
    "example",
    "fact",
    "far",
    "feel",
    "find",
    "follow",
    "following",
    "form",
    "four",
    "give",
    "given",
    "go",
    "goes",
    "going",
    "gone",
    "group",
    "hand",
    "having",
    "head",
    "hear",
    "held",
    "home",
    "however",
    "idea",
    "important",
    "include",
    "including",
    "instead",
    "keep",
    "kind",
    "known",
    "leave",
    "level",
    "life",
    "line",
    "little",
    "look",
    "looking",
    "looks",
    "lot",
    "main",
    "mean",
    "means",
    "might",
    "move",
    "never",
    "nothing",
    "often",
    "once",
    "order",
    "others",
    "part",
    "people",
    "perhaps",
    "place",
    "point",
    "possible",
    "present",
    "probably",
    "problem",
    "provide",
    "put",
    "question",
    "quite",
    "rather",
    "read",
    "real",
    "really",
    "reason",
    "room",
    "run",
    "said",
    "says",
    "second",
    "seem",
    "seems",
    "set",
    "several",
    "show",
    "side",
    "since",
    "something",
    "sometimes",
    "start",
    "state",
    "still",
    "story",
    "taken",
    "tell",
    "thing",
    "things",
    "think",
    "though",
    "three",
    "thus",
    "together",
    "told",
    "took",
    "toward",
    "try",
    "turn",
    "until",
    "used",
    "using",
    "usually",
    "wants",
    "ways",
    "went",
    "whether",
    "whole",
    "why",
    "within",
    "without",
    "word",
    "words",
    "work",
    "world",
];

fn is_stopword(word: &str) -> bool {
    use std::sync::OnceLock;
    static SET: OnceLock<std::collections::HashSet<&'static str>> = OnceLock::new();
    SET.get_or_init(|| STOPWORDS.iter().copied().collect())
        .contains(word)
}

/// True when a canonical number (digits and at most one dot) has three or more significant
/// digits: `100`, `12.5` and `0.125` do; `12`, `1.5` and `0.05` do not.
fn significant_digits(word: &str) -> usize {
    word.chars()
        .filter(char::is_ascii_digit)
        .collect::<String>()
        .trim_start_matches('0')
        .len()
}

/// True when a word, on its own, is specific enough that seeing it again means something:
/// dates and times; numbers with three or more significant digits (short numbers match by
/// accident); other words of three or more characters that are not common words.
///
/// ```
/// use ctxgc_core::projection::words::is_meaningful;
/// assert!(is_meaningful("date:2024-05-20") && is_meaningful("121") && is_meaningful("hat069"));
/// assert!(!is_meaningful("12") && !is_meaningful("the") && !is_meaningful("ok") && !is_meaningful("status"));
/// ```
pub fn is_meaningful(word: &str) -> bool {
    if word.starts_with("date:") || word.starts_with("md:") || word.starts_with("time:") {
        return true;
    }
    if word.chars().all(|c| c.is_ascii_digit() || c == '.') {
        if word.starts_with('0') && word.len() > 1 && !word.contains('.') {
            // A code with leading zeros: as specific as its length.
            return word.len() >= 4;
        }
        return significant_digits(word) >= 3;
    }
    word.chars().count() >= 3 && !is_stopword(word)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(s: &str) -> Vec<String> {
        canonical_words(s)
    }

    #[test]
    fn case_accents_and_whitespace() {
        assert_eq!(w("  Mia\n\tLI  "), ["mia", "li"]);
        assert_eq!(
            w("ACT - Agence Calédonienne"),
            ["act", "agence", "caledonienne"]
        );
        assert_eq!(w("mia_li_3668"), ["mia_li_3668"]);
    }

    #[test]
    fn numbers() {
        assert_eq!(w("1,234.50"), ["1234.5"]);
        assert_eq!(w("1234.5"), ["1234.5"]);
        assert_eq!(w("$255.0."), ["255"]);
        assert_eq!(w("0036590 007 0.50"), ["0036590", "007", "0.5"]);
        assert_eq!(w("1,2,3"), ["1", "2", "3"]);
        assert_eq!(w("HAT069 10am"), ["hat069", "10am"]);
    }

    #[test]
    fn dates_and_times() {
        for s in [
            "2024-05-20",
            "5/20/2024",
            "05/20/24",
            "May 20, 2024",
            "20 May 2024",
            "May 20th 2024",
            "20th of May, 2024",
            "2024/05/20",
        ] {
            assert_eq!(w(s), ["date:2024-05-20"], "{s}");
        }
        assert_eq!(w("May 20th"), ["md:05-20"]);
        assert_eq!(w("2024-05-15T15:00:00"), ["date:2024-05-15", "time:15:00"]);
        assert_eq!(w("2024-05-15T15:00:00Z"), ["date:2024-05-15", "time:15:00"]);
        assert_eq!(w("3:00 PM"), ["time:15:00"]);
        assert_eq!(w("12:30 a.m."), ["time:00:30"]);
        assert_eq!(w("06:00:00"), ["time:06:00"]);
        assert_eq!(w("you may go"), ["you", "may", "go"]);
    }

    #[test]
    fn meaningful_words() {
        assert!(is_meaningful("0036590"));
        assert!(!is_meaningful("007"));
        assert!(!is_meaningful("0.05"));
        assert!(is_meaningful("0.125"));
        assert!(!is_meaningful("no"));
    }
}
