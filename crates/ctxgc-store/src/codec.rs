//! How items and compiler snapshots are encoded in the database.
//!
//! MessagePack with field names (`rmp_serde::to_vec_named`): compact and several times faster
//! than JSON to decode, and self-describing, which the IR needs — its JSON values
//! (`serde_json::Value` with exact number text), internally tagged enums and skipped empty
//! fields only round-trip through a format that carries names and types.
//!
//! An item is stored without its original bytes (`raw`): those live once, content-addressed,
//! in the receipts' blob table, and are joined back when the item is read.

use ctxgc_core::Item;
use ctxgc_core::session::Session;

/// The first byte of every encoded body: bump it when the encoding changes, so old rows are
/// recognised instead of misread.
const ITEM_CODEC: u8 = 1;
const SNAPSHOT_CODEC: u8 = 1;

/// Encodes an item without its `raw` bytes.
pub fn encode_item(item: &Item) -> Result<Vec<u8>, String> {
    let stripped = Item {
        raw: String::new(),
        ..item.clone()
    };
    let mut out = vec![ITEM_CODEC];
    rmp_serde::encode::write_named(&mut out, &stripped)
        .map_err(|e| format!("item {:?} cannot be encoded: {e}", item.id))?;
    Ok(out)
}

/// Decodes an item encoded by [`encode_item`], giving it back its original bytes.
pub fn decode_item(body: &[u8], raw: Vec<u8>) -> Result<Item, String> {
    let Some((&ITEM_CODEC, rest)) = body.split_first() else {
        return Err(format!(
            "unknown item encoding {:?} (written by a newer ctxgc?)",
            body.first()
        ));
    };
    let mut item: Item =
        rmp_serde::from_slice(rest).map_err(|e| format!("undecodable item: {e}"))?;
    item.raw = String::from_utf8(raw)
        .map_err(|e| format!("item {:?}: original bytes are not UTF-8: {e}", item.id))?;
    Ok(item)
}

/// Encodes a compiler snapshot.
pub fn encode_session(session: &Session) -> Result<Vec<u8>, String> {
    let mut out = vec![SNAPSHOT_CODEC];
    rmp_serde::encode::write_named(&mut out, session)
        .map_err(|e| format!("snapshot cannot be encoded: {e}"))?;
    Ok(out)
}

/// Decodes a snapshot encoded by [`encode_session`]. `None` when the body is in an encoding
/// this build does not read: a snapshot is a cache of what the items already say, so the
/// caller replays the items instead.
pub fn decode_session(body: &[u8]) -> Option<Session> {
    match body.split_first() {
        Some((&SNAPSHOT_CODEC, rest)) => rmp_serde::from_slice(rest).ok(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ctxgc_core::frontend::events::lower_events;

    #[test]
    fn items_round_trip_with_exact_numbers_and_extra_fields() {
        let trace = r#"[
          {"id": "e1", "type": "set_var", "timestamp": 1.5, "key": "x", "value": 12345678901234567890123, "note": {"b": 1, "a": [0.1]}},
          {"id": "e2", "type": "tool_call", "timestamp": 2, "tool_name": "grep", "arguments": {"q": "x", "n": 1e400}, "importance": "high", "tags": ["keep"], "retain_until": "e9"},
          {"id": "e3", "type": "tool_result", "timestamp": 3, "call_id": "e2", "result": [1, "two", null], "is_error": true}
        ]"#;
        for item in lower_events(trace, &Default::default()).unwrap() {
            let body = encode_item(&item).unwrap();
            let back = decode_item(&body, item.raw.clone().into_bytes()).unwrap();
            assert_eq!(back, item);
        }
    }

    /// Passes and reason codes are stored by name: reordering the pass registry or the codes
    /// (or adding to either anywhere) cannot make a stored session read another pass's state
    /// or another code.
    #[test]
    fn pipelines_and_reasons_are_stored_by_name_not_position() {
        fn holds(bytes: &[u8], name: &str) -> bool {
            bytes.windows(name.len()).any(|w| w == name.as_bytes())
        }
        let session = Session::new(Default::default());
        let body = encode_session(&session).unwrap();
        for pass in [
            "dead-branch",
            "cycle",
            "superseded-value",
            "duplicates",
            "replaced-note",
        ] {
            assert!(holds(&body, pass), "pass {pass} not stored by name");
        }
        for reason in ctxgc_core::Reason::ALL {
            let mut out = Vec::new();
            rmp_serde::encode::write_named(&mut out, &reason).unwrap();
            assert!(holds(&out, reason.code()), "{reason:?} stored as {out:?}");
            let back: ctxgc_core::Reason = rmp_serde::from_slice(&out).unwrap();
            assert_eq!(back, reason);
        }
    }

    #[test]
    fn an_unknown_encoding_is_an_error_not_a_guess() {
        let err = decode_item(&[9, 1, 2], Vec::new()).unwrap_err();
        assert!(err.contains("unknown item encoding"), "{err}");
        assert!(decode_session(&[9]).is_none());
    }
}
