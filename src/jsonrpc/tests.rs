use super::*;

#[test]
fn classifies_messages_and_keeps_raw_fields() {
    let m = Message::parse(br#"{"jsonrpc":"2.0","id":"a-1","method":"tools/call","params":{"name":"x","arguments":{"k":[1, 2]},"extra":true}}"#).unwrap();
    let Message::Request(r) = m else {
        panic!("not a request")
    };
    assert_eq!(r.id.get(), r#""a-1""#);
    assert_eq!(
        r.params.unwrap().get(),
        r#"{"name":"x","arguments":{"k":[1, 2]},"extra":true}"#
    );

    let m = Message::parse(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).unwrap();
    assert!(matches!(m, Message::Notification(_)));
    let m = Message::parse(br#"{"jsonrpc":"2.0","id":7,"result":{"z":1}}"#).unwrap();
    assert!(matches!(
        m,
        Message::Response(Response {
            outcome: Outcome::Result(_),
            ..
        })
    ));
}

#[test]
fn rejects_non_jsonrpc() {
    assert_eq!(Message::parse(b"{nope").unwrap_err().code(), PARSE_ERROR);
    assert_eq!(
        Message::parse(br#"{"id":1,"method":"x"}"#)
            .unwrap_err()
            .code(),
        INVALID_REQUEST
    );
    assert_eq!(
        Message::parse(br#"{"jsonrpc":"2.0","id":1}"#)
            .unwrap_err()
            .code(),
        INVALID_REQUEST
    );
    assert_eq!(Message::parse(br#"[1]"#).unwrap_err().code(), PARSE_ERROR);
}

#[test]
fn batches_parse_each_member() {
    let Body::Batch(items) =
        Message::parse_body(br#" [{"jsonrpc":"2.0","method":"a"}, {"bad":1}]"#, 8).unwrap()
    else {
        panic!("not a batch")
    };
    assert!(items[0].is_ok());
    assert!(items[1].is_err());
}

#[test]
fn writes_envelopes_with_raw_payloads() {
    let params = RawValue::from_string(r#"{"b":1,  "a":2}"#.into()).unwrap();
    assert_eq!(
        request(&raw_u64(5), "m", Some(&params)),
        r#"{"jsonrpc":"2.0","id":5,"method":"m","params":{"b":1,  "a":2}}"#
    );
    for id in [0, 5, u64::MAX] {
        let line = numbered_request(id, "m", Some(&params));
        assert_eq!(line, request(&raw_u64(id), "m", Some(&params)));
        assert_eq!(line.len(), line.capacity(), "written at its size");
    }
}

/// Issue 9 (4): ids are strings or integers; everything else is refused,
/// and `"id": null` on a request is not a notification.
#[test]
fn request_ids_are_strings_or_integers() {
    let req = |id: &str| format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#);
    for ok in ["1", "-7", "0", r#""a""#, r#""""#, "12345678901234567890"] {
        assert!(
            matches!(Message::parse(req(ok).as_bytes()), Ok(Message::Request(_))),
            "{ok}"
        );
    }
    for bad in ["null", "1.5", "1e3", "true", "{}", "[1]", r#"{"a":1}"#] {
        let e = Message::parse(req(bad).as_bytes()).unwrap_err();
        assert_eq!(e.code(), INVALID_REQUEST, "{bad}");
    }
    let long = format!("\"{}\"", "x".repeat(MAX_ID_LEN));
    assert!(Message::parse(req(&long).as_bytes()).is_err());
    // A response may carry a null id (the answer to an unreadable request).
    assert!(matches!(
        Message::parse(br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}"#),
        Ok(Message::Response(_))
    ));
    assert!(Message::parse(br#"{"jsonrpc":"2.0","id":[1],"result":{}}"#).is_err());
}

/// Issue 9 (6): a batch past the item cap is refused before its items
/// are taken apart.
#[test]
fn batches_are_bounded() {
    let body = format!("[{}1]", "1,".repeat(2_000_000));
    let e = Message::parse_body(body.as_bytes(), 256).unwrap_err();
    assert!(matches!(e, ParseError::TooManyItems(256)));
    assert_eq!(e.code(), INVALID_REQUEST);
    let ok = format!("[{}1]", "1,".repeat(255));
    let Ok(Body::Batch(items)) = Message::parse_body(ok.as_bytes(), 256) else {
        panic!("256 items are allowed")
    };
    assert_eq!(items.len(), 256);
    assert!(matches!(
        Message::parse_body(b"[1,", 256),
        Err(ParseError::Json(_))
    ));
}

#[test]
fn lines_are_compact_and_keep_raw_values_byte_for_byte() {
    let params = RawValue::from_string(r#"{"name":"x", "arguments":{"k":[1, 2]}}"#.into()).unwrap();
    assert_eq!(
        request(&raw_u64(7), "tools/call", Some(&params)),
        r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x", "arguments":{"k":[1, 2]}}}"#
    );
    assert_eq!(
        request(&raw(&"a\"b"), "x", None),
        r#"{"jsonrpc":"2.0","id":"a\"b","method":"x"}"#
    );
    assert_eq!(
        notification("notifications/initialized", None),
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#
    );
    // A method that needs escaping is escaped as serde would.
    assert_eq!(
        notification("a\"\\\n\u{7f}é", None),
        format!(
            r#"{{"jsonrpc":"2.0","method":{}}}"#,
            serde_json::to_string("a\"\\\n\u{7f}é").unwrap()
        )
    );
    let result = RawValue::from_string(r#"{"content":[]}"#.into()).unwrap();
    assert_eq!(
        response(&raw(&"r-1"), &Outcome::Result(result.into())),
        r#"{"jsonrpc":"2.0","id":"r-1","result":{"content":[]}}"#
    );
    assert_eq!(
        error_response(None, INVALID_REQUEST, "bad"),
        r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"bad"}}"#
    );
    // Every line is one JSON object that parses back to what was written.
    let line = request(&raw_u64(1), "m", Some(&params));
    assert!(matches!(
        Message::parse(line.as_bytes()),
        Ok(Message::Request(_))
    ));
}

/// A line is allocated at its exact length when the method needs no
/// escaping, so that it becomes a body (`Bytes`) with no second allocation.
#[test]
fn lines_are_allocated_at_their_exact_length() {
    let params = RawValue::from_string(r#"{"name":"x"}"#.into()).unwrap();
    let result = RawValue::from_string(r#"{"content":[]}"#.into()).unwrap();
    let error = error_object(INVALID_REQUEST, "bad", None);
    for line in [
        request(&raw_u64(7), "tools/call", Some(&params)),
        request(&raw(&"a\"b"), "x", None),
        notification("notifications/initialized", None),
        response(&raw(&"r-1"), &Outcome::Result(result.into())),
        response(&raw_u64(3), &Outcome::Error(error)),
    ] {
        assert_eq!(line.capacity(), line.len(), "{line}");
    }
}

#[test]
fn the_one_pass_reading_agrees_with_serde() {
    let mut inputs: Vec<Vec<u8>> = [
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}"#,
        r#" { "id" : "a" , "jsonrpc" : "2.0" , "method" : "m" } "#,
        r#"{"jsonrpc":"2.0","id":1,"method":"m","params":null}"#,
        r#"{"jsonrpc":"2.0","id":null,"method":"m"}"#,
        r#"{"jsonrpc":"2.0","id":1,"result":null}"#,
        r#"{"jsonrpc":"2.0","id":1,"result":{"a":[1,2,{"b":"\u00e9"}]},"extra":[true,false,null,-1.5e3]}"#,
        r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"no"}}"#,
        r#"{"jsonrpc":"2\u002e0","id":1,"method":"m"}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools\/call"}"#,
        r#"{"jsonrpc":"2.0","\u0069d":1,"method":"m"}"#,
        r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"m"}"#,
        r#"{"jsonrpc":"2.0","x":1,"x":2,"method":"m"}"#,
        r#"{"jsonrpc":null,"method":"m"}"#,
        r#"{"jsonrpc":2.0,"method":"m"}"#,
        r#"{"jsonrpc":"2.0","method":7}"#,
        r#"{"jsonrpc":"2.0","method":null,"id":1,"result":{}}"#,
        r#"["2.0",1,"m"]"#,
        r#"{"jsonrpc":"2.0","method":"m"} {}"#,
        r#"{"jsonrpc":"2.0","method":"m",}"#,
        r#"{"jsonrpc":"2.0","method":"m"#,
        "{\"jsonrpc\":\"2.0\",\"method\":\"m\"}\n\t\r ",
        "{\"jsonrpc\":\"2.0\",\"method\":\"a\u{1}b\"}",
        r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"name":"a","n\u0061me":"b"}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"name":"a","name":"b"}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"name":"a\"b"}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"m","params":[1]}"#,
        r#"{"jsonrpc":"2.0","method":"m","params":{"_meta":{"p":1,"\u0070":2}}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"ref":{"a":[{"a":1}],"a":2}}}"#,
        "",
        "null",
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect();
    // Invalid UTF-8 where serde does not look (an ignored string) and where it does.
    inputs.push(b"{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"x\":\"\xff\"}".to_vec());
    inputs.push(b"{\"jsonrpc\":\"2.0\",\"method\":\"\xff\"}".to_vec());
    let seeds = concat!(env!("CARGO_MANIFEST_DIR"), "/fuzz/corpus/envelope");
    for seed in std::fs::read_dir(seeds).unwrap() {
        inputs.push(std::fs::read(seed.unwrap().path()).unwrap());
    }
    for input in &inputs {
        crate::fuzzing::envelope(input);
    }
    // The common messages are read in one pass, not left to serde.
    for common in &inputs[..7] {
        let text = std::str::from_utf8(common).unwrap();
        assert!(Envelope::read(text, &mut Unwatched).is_some(), "{text}");
    }
}

/// The name a call routes on is found in the one pass wherever it is
/// plainly written, and is exactly what a full reading finds; anything
/// else is left to the router's own reading (`peek_string`).
#[test]
fn the_routed_name_is_found_in_the_one_pass() {
    let routed = |method: &str, params: &str| {
        let text = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"{method}","params":{params}}}"#);
        let Ok(Message::Request(r)) = Message::parse_client(text.as_bytes()) else {
            panic!("{text}");
        };
        r.routed.get(r.params.as_deref()).map(String::from)
    };
    let some = |s: &str| Some(s.to_owned());
    let call = |params| routed("tools/call", params);
    assert_eq!(
        call(r#"{"name":"echo","arguments":{"name":"x"}}"#),
        some("echo")
    );
    assert_eq!(
        call(r#"{"arguments":{"name":"x"},"name":"echo"}"#),
        some("echo")
    );
    assert_eq!(call(r#" { "uri" :	"file:///a" , "name" : "" } "#), some(""));
    assert_eq!(routed("prompts/get", r#"{"name":"p"}"#), some("p"));
    assert_eq!(
        routed("resources/read", r#"{"name":"n","uri":"u"}"#),
        some("u")
    );
    assert_eq!(routed("resources/subscribe", r#"{"uri":"u"}"#), some("u"));
    // Only where the method routes.
    assert_eq!(routed("tools/list", r#"{"name":"echo"}"#), None);
    assert_eq!(call(r#"{"_meta":{"name":"x"},"uri":"u"}"#), None);
    // Escaped, or not a string: not found here.
    assert_eq!(call(r#"{"name":"a\"b"}"#), None);
    assert_eq!(call(r#"{"name":7}"#), None);
    assert_eq!(call(r#"{"arguments":{}}"#), None);
    // Other params text (a params rewritten since) is not read by it.
    let text = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}"#;
    let Ok(Message::Request(r)) = Message::parse_client(text) else {
        panic!()
    };
    assert_eq!(r.routed.get(r.params.as_deref()), Some("echo"));
    let other: Box<RawValue> = serde_json::from_str(r#"{"name":"other","x":1}"#).unwrap();
    assert_eq!(r.routed.get(Some(&other)), None);
    // A backend's message (not a client's) carries none.
    let Ok(Message::Request(r)) = Message::parse(text) else {
        panic!()
    };
    assert_eq!(r.routed.get(r.params.as_deref()), None);
}
