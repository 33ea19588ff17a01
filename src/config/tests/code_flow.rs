//! `oauth.flow = "authorization_code"`, `max_grants` and `[server]
//! public_url`: what `sluice check` takes and refuses, and what it shows.

use super::{err, ok};

const AUTH: &str = "[auth]\nbearer_tokens_env = \"T\"\n";
const FLOW: &str = "[backends.gh]\ntransport = \"http\"\nurl = \"http://127.0.0.1:9/mcp\"\n\
                    oauth = { flow = \"authorization_code\" }\n";

fn joined(lines: Vec<String>) -> String {
    lines.join("\n")
}

#[test]
fn the_flow_is_configured_with_its_defaults() {
    let text = format!("[server]\npublic_url = \"https://gw.example.com/base/\"\n{AUTH}{FLOW}");
    let loaded = ok(&text, &[("T", "alice=tok-a")]);
    let flow = loaded.config.backends[0].code_flow.clone().unwrap();
    assert_eq!(flow.max_grants, 10_000);
    assert_eq!(flow.client_id, None);
    assert_eq!(
        flow.callback().as_str(),
        "https://gw.example.com/base/oauth/callback"
    );
    assert!(loaded.config.backends[0].credentials.is_none());
    let shown = crate::config::describe(&loaded);
    assert!(shown.contains("authorization code"), "{shown}");
    assert!(shown.contains("registered dynamically"), "{shown}");
}

#[test]
fn a_configured_client_secret_is_never_shown() {
    let text = format!(
        "[server]\npublic_url = \"http://127.0.0.1:7400\"\n{AUTH}[backends.gh]\ntransport = \"http\"\n\
         url = \"http://127.0.0.1:9/mcp\"\nmax_grants = 5\noauth = {{ flow = \"authorization_code\", \
         client_id = \"sluice\", client_secret_env = \"GH_SECRET\", scopes = [\"repo\"] }}\n"
    );
    let loaded = ok(
        &text,
        &[("T", "alice=tok-a"), ("GH_SECRET", "s3cr3t-value")],
    );
    let flow = loaded.config.backends[0].code_flow.clone().unwrap();
    assert_eq!(flow.max_grants, 5);
    assert_eq!(flow.scopes, ["repo"]);
    assert_eq!(
        flow.client_secret.as_ref().unwrap().expose(),
        "s3cr3t-value"
    );
    let shown = crate::config::describe(&loaded);
    assert!(!shown.contains("s3cr3t-value"), "{shown}");
    assert!(shown.contains("as `sluice` (with a secret)"), "{shown}");
}

#[test]
fn public_url_is_required_and_must_be_an_http_url() {
    let missing = joined(err(&format!("{AUTH}{FLOW}"), &[("T", "alice=tok-a")]));
    assert!(missing.contains("server.public_url"), "{missing}");
    assert!(missing.contains("is required by backend `gh`"), "{missing}");
    for bad in ["ftp://x", "not a url", "https://gw.example.com/?a=1"] {
        let text = format!("[server]\npublic_url = \"{bad}\"\n{AUTH}{FLOW}");
        let e = joined(err(&text, &[("T", "alice=tok-a")]));
        assert!(e.contains("server.public_url"), "{bad}: {e}");
    }
}

#[test]
fn the_flow_is_refused_where_it_cannot_work() {
    let public = "[server]\npublic_url = \"http://127.0.0.1:7400\"\n";
    // Without [auth]: everyone is anonymous.
    let e = joined(err(&format!("{public}{FLOW}"), &[]));
    assert!(e.contains("needs [auth]"), "{e}");
    // Not on stdio or sse.
    let stdio = format!(
        "{public}{AUTH}[backends.gh]\ncommand = \"x\"\noauth = {{ flow = \"authorization_code\" }}\n"
    );
    let e = joined(err(&stdio, &[("T", "alice=tok-a")]));
    assert!(e.contains("needs transport = \"http\""), "{e}");
    // Not with the client credentials keys.
    let mixed = format!(
        "{public}{AUTH}[backends.gh]\ntransport = \"http\"\nurl = \"http://127.0.0.1:9/mcp\"\n\
         oauth = {{ flow = \"authorization_code\", token_url = \"http://127.0.0.1:9/token\" }}\n"
    );
    let e = joined(err(&mixed, &[("T", "alice=tok-a")]));
    assert!(e.contains("backends.gh.oauth.token_url"), "{e}");
    // max_grants only with the flow.
    let stray = format!("{AUTH}{}max_grants = 3\n", super::MINIMAL);
    let e = joined(err(&stray, &[("T", "alice=tok-a")]));
    assert!(e.contains("backends.web.max_grants"), "{e}");
    // With [cluster], only with the sessions' key ring (grants are sealed
    // with it in Redis).
    let cluster =
        format!("{public}{AUTH}{FLOW}[cluster]\nredis_url = \"redis://127.0.0.1:6379\"\n");
    let e = joined(err(&cluster, &[("T", "alice=tok-a")]));
    assert!(e.contains("backends.gh.oauth.flow"), "{e}");
    assert!(e.contains("SLUICE_SESSION_KEY"), "{e}");
}

#[test]
fn the_flow_runs_in_a_cluster_with_the_session_key_ring() {
    let key = crate::vocab::generate_key();
    let text = format!(
        "[server]\npublic_url = \"https://gw.example.com\"\nsession_ids = \"sealed\"\n\
         {AUTH}{FLOW}[cluster]\nredis_url = \"redis://127.0.0.1:6379\"\n"
    );
    let loaded = ok(&text, &[("T", "alice=tok-a"), ("SLUICE_SESSION_KEY", &key)]);
    assert!(loaded.config.cluster.is_some());
    assert!(loaded.config.backends[0].code_flow.is_some());
}

#[test]
fn public_url_may_come_from_the_environment() {
    let loaded = ok(
        &format!("{AUTH}{FLOW}"),
        &[
            ("T", "alice=tok-a"),
            ("SLUICE_SERVER__PUBLIC_URL", "https://gw.example.com"),
        ],
    );
    let flow = loaded.config.backends[0].code_flow.clone().unwrap();
    assert_eq!(
        flow.callback().as_str(),
        "https://gw.example.com/oauth/callback"
    );
    let shown = crate::config::describe(&loaded);
    assert!(shown.contains("server.public_url"), "{shown}");
}
