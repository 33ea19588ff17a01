//! HTTP/1.1 as the gateway speaks it itself: the wire format, with no I/O
//! of its own, for both directions (`codec`: request and response heads,
//! read and written, a body's framing, the limits; the front's connection
//! and the client both use it), and the client that backends, the OAuth
//! issuer and the OTLP collector are reached with (`client`), beside it
//! so that no caller reaches into `upstream` for it; a header value as
//! text (`header_text`). It imports nothing above the runtime's own
//! utilities.

pub(crate) mod client;
pub(crate) mod codec;
pub(crate) mod header_text;
