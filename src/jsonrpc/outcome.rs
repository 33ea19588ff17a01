//! What an outcome says beyond its kind, for those that report on it
//! (traces, the audit trail): an error's code, and a tool's own failure.

use serde_json::value::RawValue;

use super::Needle;

/// A JSON-RPC error object's code (None: it has no integer `code`).
pub(crate) fn error_code(error: &RawValue) -> Option<i64> {
    #[derive(serde::Deserialize)]
    struct Coded {
        code: i64,
    }
    serde_json::from_str::<Coded>(error.get())
        .ok()
        .map(|c| c.code)
}

/// Whether a `tools/call` result says `"isError": true`: the tool ran and
/// failed, which the protocol reports as a result.
pub(crate) fn is_tool_error(result: &RawValue) -> bool {
    static IS_ERROR: Needle = Needle::new("isError");
    if !IS_ERROR.in_text(result.get()) {
        return false;
    }
    #[derive(serde::Deserialize)]
    struct Flagged {
        #[serde(rename = "isError", default)]
        is_error: bool,
    }
    serde_json::from_str::<Flagged>(result.get()).is_ok_and(|f| f.is_error)
}
