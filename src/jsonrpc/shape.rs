//! A message's id, by its shape: a request's a string or an integer
//! (JSON-RPC 2.0; MCP forbids null), a response's also null, and neither
//! longer than `MAX_ID_LEN` as written.

use serde_json::value::RawValue;

use super::{MAX_ID_LEN, ParseError};

/// What an id is, by its first byte: the JSON text is already valid.
#[derive(Debug, PartialEq, Eq)]
enum IdShape {
    Str,
    Integer,
    Null,
    Other,
}

fn id_shape(id: &RawValue) -> IdShape {
    let text = id.get();
    match text.as_bytes().first() {
        Some(b'"') => IdShape::Str,
        Some(b'n') => IdShape::Null,
        // Bytes, not `str::contains` of a char set (a generic searcher,
        // about 130 instructions an id): an id is a few bytes.
        Some(b'-' | b'0'..=b'9') if !text.bytes().any(|b| matches!(b, b'.' | b'e' | b'E')) => {
            IdShape::Integer
        }
        _ => IdShape::Other,
    }
}

/// A request's id: a string or an integer (JSON-RPC 2.0; MCP forbids null).
pub(super) fn check_request_id(id: &RawValue) -> Result<(), ParseError> {
    match id_shape(id) {
        IdShape::Str | IdShape::Integer if id.get().len() <= MAX_ID_LEN => Ok(()),
        IdShape::Str | IdShape::Integer => Err(ParseError::Invalid("id is too long")),
        IdShape::Null => Err(ParseError::Invalid("request id must not be null")),
        IdShape::Other => Err(ParseError::Invalid("id must be a string or an integer")),
    }
}

/// A response's id may also be null: the answer to a request whose id
/// could not be read.
pub(super) fn check_response_id(id: &RawValue) -> Result<(), ParseError> {
    match id_shape(id) {
        IdShape::Null => Ok(()),
        _ => check_request_id(id),
    }
}
