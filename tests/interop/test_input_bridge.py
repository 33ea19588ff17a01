"""Questions from backends answered by real SDK clients' own callbacks, through sluice.

Backends (docs/clients.md, "Questions from backends"):

| backend | server | era |
|---|---|---|
| `mod` | examples/faulty_backend.rs `--mode modern` over HTTP | 2026-07-28 only; checks the request's declared client capabilities before it asks (-32021 with `data.requiredCapabilities` if not) |
| `everything` | @modelcontextprotocol/server-everything over stdio, shared | legacy; asks by server-to-client requests |
| `fs` | examples/faulty_backend.rs `--mode roots` over stdio, per-session | legacy; asks roots/list |

`mod`'s tools ask one question each as an `input_required` result (key
`who`, `requestState` `ask-TOOL`): `fault` a form elicitation for `name`
(-> `Hello, NAME!`), `ask_url` a URL elicitation, `ask_sampling` a sampling
request, `ask_roots` roots/list (-> `answered: <the client's answer as JSON>`).

Clients (real_clients.py), each with its own callbacks:

| kind | SDK | era through the gateway |
|---|---|---|
| `py-legacy` | Python SDK `mcp` 2.3.0, `mode="legacy"` | 2025-11-25 session |
| `py-2026` | the same, `mode="2026-07-28"` | 2026-07-28 |
| `ts` | TypeScript SDK v1 `@modelcontextprotocol/sdk` 1.32.2 | 2025-11-25 session |
| `ts2-legacy` | TypeScript SDK v2 `@modelcontextprotocol/client` 2.x, default negotiation | 2025-11-25 session |
| `ts2-2026` | the same, `versionNegotiation: {mode: "auto"}` | 2026-07-28 |

What is shown:

* a legacy client (sessions) reaches the 2026-07-28-only backend's questions
  through the gateway's bridge: the backend is told what the client declared
  in `initialize`, so it asks; the gateway relays the question as a
  server-to-client request on the call's stream, and retries the backend
  call with the client's answer and the backend's `requestState` untouched;
* a 2026-07-28 client gets the backend's `input_required` result and retries
  it itself (its SDK's auto-fulfilment, through the same callbacks);
* a client that did not declare sampling gets the backend's -32021 refusal
  for a sampling question, and is never asked;
* the TypeScript SDK v2 client answers a *legacy* backend's questions through
  its callbacks in both eras (2026-07-28: the gateway turns them into an
  `input_required` result, which the SDK fulfils itself).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from harness import (
    GatewayFactory,
    LinePeer,
    everything_stdio_backend,
    example_bin,
    locate_everything_js,
    start_faulty_http,
    stop_line_peer,
    toml_str,
)
from real_clients import ALL_KINDS, LEGACY_KINDS, Events, Host, Target, call_tool, driver, only, texts

pytestmark = pytest.mark.anyio

TEST_TIMEOUT_S = 90
MODERN = "2026-07-28"
ROOT = {"uri": "file:///srv/interop-root", "name": "interop-root"}
# The questions of the modern backend's tools (the state each asks with is `ask-TOOL`).
QUESTIONS = ["fault", "ask_url", "ask_sampling", "ask_roots"]


def host(kind: str, declare: tuple[str, ...] = ("sampling", "elicitation", "elicitation_url", "roots")) -> Host:
    return Host(
        sampling_text=f"SAMPLED-BY-{kind}-41c9",
        elicitation_content={"name": f"Ada {kind}"},
        roots=[ROOT] if "roots" in declare else [],
        declare=declare,
    )


@pytest.fixture
def faulty_modern(tmp_path: Path) -> Iterator[LinePeer]:
    """faulty_backend --mode modern over HTTP on 127.0.0.1 (exits when our pipe closes)."""
    peer = start_faulty_http("modern", tmp_path)
    yield peer
    stop_line_peer(peer)


def modern_backend(url: str) -> str:
    return f'[backends.mod]\ntransport = "http"\nurl = {toml_str(url)}\n'


def seen_calls(peer: LinePeer, tool: str) -> list[dict[str, Any]]:
    """The params of every tools/call of `tool` that reached the backend, in order (its /seen)."""
    seen = httpx.get(peer.base_url + "/seen", timeout=10).json()
    return [
        r["body"]["params"]
        for r in seen
        if isinstance(r.get("body"), dict)
        and r["body"].get("method") == "tools/call"
        and r["body"]["params"].get("name") == tool
    ]


def declared(params: dict[str, Any]) -> dict[str, Any]:
    return (params.get("_meta") or {}).get("io.modelcontextprotocol/clientCapabilities")


def answered(result: dict[str, Any]) -> Any:
    """The client's answer the modern backend echoes: `answered: JSON`."""
    (text,) = texts(result)
    assert text.startswith("answered: "), result
    return json.loads(text[len("answered: ") :])


# ==========================================================================
# a 2026-07-28-only backend's questions


@pytest.mark.parametrize("kind", ALL_KINDS)
async def test_modern_backends_questions_answered_by_callbacks(
    kind: str, gateway_factory: GatewayFactory, faulty_modern: LinePeer
) -> None:
    """Each kind of question of the 2026-07-28-only backend reaches this client's own callback
    exactly once, with the backend's question, and the tool's result carries the callback's
    answer: form elicitation (`Hello, NAME!`), URL elicitation, sampling, roots.

    Legacy clients: through the gateway's bridge (the client is asked on the call's stream,
    by a request whose id is the gateway's relay id `sluice:@:...`). The backend got, per tool, exactly two calls: the first declaring in `_meta` the
    capabilities the client declared (sampling, elicitation with URL mode, roots), the retry
    with the answer under its key `who` and its `requestState` unchanged.
    2026-07-28 clients: the backend's `input_required` reaches the client, whose SDK hands
    its callback the backend's key (`who`) and retries.
    """
    gw = gateway_factory(modern_backend(faulty_modern.mcp_url))
    h = host(kind)
    results: dict[str, dict[str, Any]] = {}
    seen: dict[str, Events] = {}
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with driver(kind, Target(url=gw.mcp_url), h, direct=False) as c:
            version = c.protocol_version
            await c.events()
            for tool in QUESTIONS:
                results[tool] = await call_tool(c, f"mod__{tool}", {})
                seen[tool] = await c.events()
    failures = {t: r for t, r in results.items() if "error" in r or r.get("isError")}
    assert not failures, f"[{kind}] calls failed: {json.dumps(failures, indent=1)}"
    ids = c.callback_request_ids
    if kind in LEGACY_KINDS:
        assert version and version != MODERN, f"[{kind}] not a legacy session: {version!r}"
        # asked by server-to-client requests: the gateway's relay ids, one per question
        assert len(set(ids)) == len(QUESTIONS), f"[{kind}] callback request ids {ids}"
        assert all(str(i).startswith("sluice:@:") for i in ids), f"[{kind}] callback request ids {ids}"
    else:
        assert version == MODERN, f"[{kind}] not a 2026-07-28 client: {version!r}"
        # the SDK fulfilled input_required results: the backend's own key
        assert ids == ["who"] * len(QUESTIONS), f"[{kind}] callback request ids {ids}"

    # form elicitation
    (asked,) = only(seen["fault"], "elicitation")
    assert asked.get("mode", "form") == "form", asked
    assert asked["message"] == "Your name?", asked
    assert asked["requestedSchema"]["properties"] == {"name": {"type": "string"}}, asked
    assert texts(results["fault"]) == [f"Hello, Ada {kind}!"], results["fault"]

    # URL elicitation
    (asked,) = only(seen["ask_url"], "elicitation")
    assert asked["mode"] == "url", asked
    assert asked["url"] == "https://example.invalid/consent", asked
    assert asked["message"] == "Consent, please", asked
    assert answered(results["ask_url"])["action"] == "accept", results["ask_url"]

    # sampling
    (asked,) = only(seen["ask_sampling"], "sampling")
    assert asked["maxTokens"] == 16, asked
    assert asked["messages"][0]["content"]["text"] == "Capital of France?", asked
    answer = answered(results["ask_sampling"])
    assert answer["content"] == {"type": "text", "text": h.sampling_text}, answer
    assert answer["model"] == "interop-fake-model" and answer["role"] == "assistant", answer

    # roots
    only(seen["ask_roots"], "roots")
    assert answered(results["ask_roots"])["roots"] == [ROOT], results["ask_roots"]

    # what the backend was told, call by call
    for tool in QUESTIONS:
        calls = seen_calls(faulty_modern, tool)
        assert len(calls) == 2, f"[{kind}] {tool}: the backend got {len(calls)} calls: {calls}"
        first, retry = calls
        caps = declared(first)
        assert "inputResponses" not in first, first
        assert {"sampling", "elicitation", "roots"} <= set(caps or {}), f"[{kind}] {tool}: told {caps}"
        assert "url" in caps["elicitation"], f"[{kind}] {tool}: told {caps}"
        assert retry.get("requestState") == f"ask-{tool}", retry
        assert list(retry.get("inputResponses") or {}) == ["who"], retry


@pytest.mark.parametrize("kind", ALL_KINDS)
async def test_undeclared_sampling_gets_the_backends_refusal(
    kind: str, gateway_factory: GatewayFactory, faulty_modern: LinePeer
) -> None:
    """A client that declared elicitation (form and URL) but not sampling calls the tool that
    asks for sampling: it gets the backend's -32021 refusal with
    `data.requiredCapabilities` `{"sampling": {}}`, its callbacks are never invoked, and the
    backend got exactly one call (no retry), told no sampling capability. The same client's
    form elicitation is still asked and answered (the refusal is per capability)."""
    gw = gateway_factory(modern_backend(faulty_modern.mcp_url))
    h = host(kind, declare=("elicitation", "elicitation_url"))
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with driver(kind, Target(url=gw.mcp_url), h, direct=False) as c:
            await c.events()
            refused = await call_tool(c, "mod__ask_sampling", {})
            refused_seen = await c.events()
            greeted = await call_tool(c, "mod__fault", {})
            greeted_seen = await c.events()
    assert "error" in refused, f"[{kind}] mod__ask_sampling without sampling: {refused}"
    assert refused["error"]["code"] == -32021, f"[{kind}] {refused}"
    assert (refused["error"]["data"] or {}).get("requiredCapabilities") == {"sampling": {}}, f"[{kind}] {refused}"
    assert refused_seen == Events(), f"[{kind}] a callback ran: {refused_seen}"
    (call_params,) = seen_calls(faulty_modern, "ask_sampling")
    assert "sampling" not in (declared(call_params) or {}), call_params
    assert texts(greeted) == [f"Hello, Ada {kind}!"], greeted
    assert len(only(greeted_seen, "elicitation")) == 1, greeted_seen


# ==========================================================================
# a legacy backend's questions to the TypeScript SDK v2 client, both eras


@pytest.mark.parametrize("kind", ["ts2-legacy", "ts2-2026"])
async def test_ts2_client_answers_a_legacy_backends_questions(kind: str, gateway_factory: GatewayFactory) -> None:
    """server-everything (legacy, stdio) asks by sampling and form elicitation during a call.
    The TypeScript SDK v2 client's own callbacks answer, once each, with the backend's
    question, and the tool reports the answer. faulty_backend `--mode roots` (legacy, stdio,
    per-session) asks roots/list during its `fault` call: it reports the client's roots.

    Legacy era: the question comes as a server-to-client request on the call's stream.
    2026-07-28 era: the client has no such channel (the SDK drops inbound requests on a
    modern connection); the gateway answers the call with `input_required`, and the SDK
    fulfils it through the same callbacks and retries (`versionNegotiation: auto`)."""
    roots_backend = (
        f'[backends.fs]\ntransport = "stdio"\ncommand = {toml_str(str(example_bin("faulty_backend")))}\n'
        'args = ["--transport", "stdio", "--mode", "roots"]\nisolation = "per-session"\n'
    )
    gw = gateway_factory(everything_stdio_backend(locate_everything_js()) + roots_backend)
    # elicitation: {"name": "Ada Lovelace", "check": true}
    h = Host(sampling_text=f"SAMPLED-BY-{kind}-7e21", roots=[ROOT])
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with driver(kind, Target(url=gw.mcp_url), h, direct=False) as c:
            era, version = c.era, c.protocol_version
            await c.events()
            sampled = await call_tool(c, "everything__trigger-sampling-request", {"prompt": "say the marker", "maxTokens": 16})
            sampled_seen = await c.events()
            elicited = await call_tool(c, "everything__trigger-elicitation-request", {})
            elicited_seen = await c.events()
            rooted = await call_tool(c, "fs__fault", {})
            rooted_seen = await c.events()
    assert (era, version == MODERN) == (("modern", True) if kind == "ts2-2026" else ("legacy", False)), (era, version)
    assert "error" not in sampled and not sampled.get("isError"), f"[{kind}] {sampled}"
    (asked,) = only(sampled_seen, "sampling")
    assert asked["maxTokens"] == 16 and "say the marker" in json.dumps(asked["messages"]), asked
    assert h.sampling_text in json.dumps(sampled["content"]), sampled
    assert "error" not in elicited and not elicited.get("isError"), f"[{kind}] {elicited}"
    (asked,) = only(elicited_seen, "elicitation")
    assert "name" in asked["requestedSchema"]["properties"], asked
    assert any("- Name: Ada Lovelace" in t for t in texts(elicited)), elicited
    assert "error" not in rooted and not rooted.get("isError"), f"[{kind}] {rooted}"
    # asked after its handshake and during the call (each time by this client's callback)
    assert len(only(rooted_seen, "roots")) >= 1, rooted_seen
    (report,) = texts(rooted)
    assert json.loads(report)["during"] == {"roots": [ROOT]}, report
