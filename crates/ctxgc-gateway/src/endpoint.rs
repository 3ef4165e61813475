//! Which requests carry a conversation the gateway compiles.

use ctxgc_core::Format;

/// The message-list format of a `POST` to `path` (the path the provider sees), when it is
/// one of the three conversation endpoints: OpenAI Chat Completions, OpenAI Responses,
/// Anthropic Messages. Everything else is passed through untouched.
///
/// ```
/// use ctxgc_core::Format;
/// use ctxgc_gateway::endpoint::format_of;
/// assert_eq!(format_of("/v1/chat/completions"), Some(Format::OpenaiChat));
/// assert_eq!(format_of("/v1/responses"), Some(Format::Responses));
/// assert_eq!(format_of("/v1/messages"), Some(Format::Anthropic));
/// assert_eq!(format_of("/v1/messages/count_tokens"), None);
/// assert_eq!(format_of("/v1/threads/t1/messages"), None);
/// ```
pub fn format_of(path: &str) -> Option<Format> {
    let path = path.trim_end_matches('/');
    let path = path.strip_prefix("/v1").unwrap_or(path);
    ctxgc_core::formats::by_endpoint(path).map(|wire| wire.format())
}

/// The key of the item list in a request body of `format`.
pub fn items_key(format: Format) -> &'static str {
    format.wire().items_key()
}
