"""The official MCP Python SDK (`mcp` 2.3.0) as a client of sluice.

Every test here talks Streamable HTTP to a real `sluice serve` process in
legacy (2025, `initialize`-based) mode: `mcp.Client(url, mode="legacy")`
offers protocol 2025-11-25 in `initialize`.

* Demo backend: `sluice serve` with no config (tools demo__echo, demo__add,
  demo__sleep_ms, demo__counter; prompt demo__greeting; resource
  sluice://demo/demo://readme; a resource template).
* server-everything (`@modelcontextprotocol/server-everything`, pinned in
  package.json) over stdio behind the gateway: names become everything__<name>;
  the backend's sampling/createMessage must be routed to the client whose
  tools/call caused it.
* A reference run of the same SDK calls straight against server-everything in
  streamableHttp mode (no gateway), so a failure in the gateway tests can be
  told apart from an SDK or peer problem.

Nothing is skipped: a test that fails here is a gateway that does not (yet)
meet /work/shared/DESIGN.md.
"""

from __future__ import annotations

import re
from typing import Any

import anyio
import httpx
import mcp.types as types
import pytest
from mcp import Client, MCPError
from mcp.client.session import ClientRequestContext

from harness import Gateway, GatewayFactory, everything_stdio_backend

pytestmark = pytest.mark.anyio

TEST_TIMEOUT_S = 60
TOOL_NAME_RE = re.compile(r"^[A-Za-z0-9_.\-]{1,128}$")
LEGACY_VERSIONS = {"2025-03-26", "2025-06-18", "2025-11-25"}
DEMO_README_URI = "sluice://demo/demo://readme"


def legacy_client(url: str, **kw: Any) -> Client:
    """The SDK's high-level client over Streamable HTTP, forced into the legacy handshake.

    `cache=None` turns off the SDK's client-side response cache so that every
    call reaches the gateway.
    """
    kw.setdefault("read_timeout_seconds", 30)
    return Client(url, mode="legacy", cache=None, **kw)


def texts(result: types.CallToolResult | types.GetPromptResult) -> list[str]:
    if isinstance(result, types.CallToolResult):
        blocks = result.content
    else:
        blocks = [m.content for m in result.messages]
    return [b.text for b in blocks if isinstance(b, types.TextContent)]


def numbers_in(text: str) -> list[float]:
    return [float(x) for x in re.findall(r"-?\d+(?:\.\d+)?", text)]


class ProgressLog:
    def __init__(self) -> None:
        self.events: list[tuple[float, float | None, str | None]] = []

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        self.events.append((progress, total, message))


class FakeSampler:
    """A sampling callback that answers with a fixed marker text and records what it was asked."""

    def __init__(self, marker: str) -> None:
        self.marker = marker
        self.requests: list[types.CreateMessageRequestParams] = []

    async def __call__(
        self, context: ClientRequestContext, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult:
        self.requests.append(params)
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text=self.marker),
            model="interop-fake-model",
            stop_reason="endTurn",
        )


def assert_tool_names_valid(tools: list[types.Tool]) -> None:
    bad = [t.name for t in tools if not TOOL_NAME_RE.match(t.name)]
    assert not bad, f"tool names outside the spec's 1-128 [A-Za-z0-9_.-] rule: {bad}"
    names = [t.name for t in tools]
    assert len(names) == len(set(names)), f"duplicate tool names: {names}"


# ==========================================================================
# (a) the built-in demo backend


async def test_demo_initialize_and_lists(demo_gateway: Gateway) -> None:
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with legacy_client(demo_gateway.mcp_url) as client:
            assert client.protocol_version in LEGACY_VERSIONS
            assert client.server_info is not None and client.server_info.name
            caps = client.server_capabilities
            assert caps.tools is not None, "gateway must advertise tools"
            assert caps.prompts is not None, "gateway must advertise prompts"
            assert caps.resources is not None, "gateway must advertise resources"

            tools = (await client.list_tools()).tools
            names = {t.name for t in tools}
            assert {"demo__echo", "demo__add", "demo__sleep_ms", "demo__counter"} <= names, names
            assert_tool_names_valid(tools)
            echo = next(t for t in tools if t.name == "demo__echo")
            assert "text" in echo.input_schema.get("properties", {}), echo.input_schema

            prompts = (await client.list_prompts()).prompts
            greeting = next((p for p in prompts if p.name == "demo__greeting"), None)
            assert greeting is not None, [p.name for p in prompts]
            assert any(a.name == "name" for a in greeting.arguments or []), greeting

            resources = (await client.list_resources()).resources
            assert DEMO_README_URI in {str(r.uri) for r in resources}, [str(r.uri) for r in resources]

            templates = (await client.list_resource_templates()).resource_templates
            assert templates, "the demo backend has a resource template"
            assert all(t.uri_template.startswith("sluice://demo/") for t in templates), [
                t.uri_template for t in templates
            ]


async def test_demo_tools_prompt_resource(demo_gateway: Gateway) -> None:
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with legacy_client(demo_gateway.mcp_url) as client:
            text = "hello through sluice: ünïcødé ✓"
            echoed = await client.call_tool("demo__echo", {"text": text})
            assert not echoed.is_error, echoed
            assert texts(echoed) == [text]

            added = await client.call_tool("demo__add", {"a": 19, "b": 23})
            assert not added.is_error, added
            found = [n for t in texts(added) for n in numbers_in(t)]
            if isinstance(added.structured_content, dict):
                found += [v for v in added.structured_content.values() if isinstance(v, int | float)]
            assert 42 in found, added

            first = await client.call_tool("demo__counter", {})
            second = await client.call_tool("demo__counter", {})
            assert not first.is_error and not second.is_error
            n1 = numbers_in(" ".join(texts(first)))
            n2 = numbers_in(" ".join(texts(second)))
            assert n1 and n2 and n2[-1] == n1[-1] + 1, (first, second)

            prompt = await client.get_prompt("demo__greeting", {"name": "Ada Lovelace"})
            assert prompt.messages, prompt
            assert any("Ada Lovelace" in t for t in texts(prompt)), prompt

            read = await client.read_resource(DEMO_README_URI)
            assert read.contents, read
            assert str(read.contents[0].uri) == DEMO_README_URI, read.contents[0].uri
            assert isinstance(read.contents[0], types.TextResourceContents)
            assert read.contents[0].text.strip(), "demo readme is empty"


async def test_demo_unknown_tool_is_an_error_not_a_hang(demo_gateway: Gateway) -> None:
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with legacy_client(demo_gateway.mcp_url) as client:
            try:
                result = await client.call_tool("demo__no_such_tool", {})
            except MCPError:
                pass  # a JSON-RPC error is a correct answer
            else:
                assert result.is_error, result  # so is an isError tool result


async def test_demo_sleep_reports_progress(demo_gateway: Gateway) -> None:
    progress = ProgressLog()
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with legacy_client(demo_gateway.mcp_url) as client:
            result = await client.call_tool("demo__sleep_ms", {"ms": 600}, progress_callback=progress)
            assert not result.is_error, result
    assert progress.events, "no notifications/progress reached the client for demo__sleep_ms"
    values = [p for p, _, _ in progress.events]
    assert values == sorted(values) and len(set(values)) == len(values), progress.events
    for p, total, _ in progress.events:
        assert total is None or p <= total, progress.events


async def test_demo_session_lifecycle_metrics(demo_gateway: Gateway) -> None:
    """One client session: opened, live while used, closed by the SDK's DELETE on exit."""
    before = demo_gateway.metrics()
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with legacy_client(demo_gateway.mcp_url) as client:
            await client.call_tool("demo__echo", {"text": "x"})
            during = demo_gateway.metrics()
            assert during.value("sluice_client_sessions_live") == 1, during.text
            assert during.value("sluice_backend_up", backend="demo") == 1, during.text
    after = demo_gateway.metrics()
    opened = after.total("sluice_client_sessions_opened_total") - before.total("sluice_client_sessions_opened_total")
    assert opened == 1, after.text
    assert after.value("sluice_client_sessions_live") == 0, after.text
    deleted = after.total("sluice_client_sessions_closed_total", reason="delete") - before.total(
        "sluice_client_sessions_closed_total", reason="delete"
    )
    assert deleted == 1, "the SDK sends DELETE on exit (terminate_on_close=True)\n" + after.text
    assert after.total("sluice_requests_total", era="legacy", method="tools/call", outcome="ok") >= 1, after.text


async def test_health_endpoints(demo_gateway: Gateway) -> None:
    async with httpx.AsyncClient(timeout=10) as http:
        assert (await http.get(demo_gateway.base_url + "/healthz")).status_code == 200
        assert (await http.get(demo_gateway.base_url + "/readyz")).status_code == 200


# ==========================================================================
# (b) server-everything over stdio behind the gateway


def everything_config(everything_js, isolation: str = "shared") -> str:
    return everything_stdio_backend(everything_js, isolation=f'"{isolation}"')


@pytest.fixture
def everything_gateway(gateway_factory: GatewayFactory, everything_js) -> Gateway:
    return gateway_factory(everything_config(everything_js))


async def test_everything_lists_and_calls(everything_gateway: Gateway) -> None:
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with legacy_client(everything_gateway.mcp_url) as client:
            assert client.protocol_version in LEGACY_VERSIONS

            tools = (await client.list_tools()).tools
            names = {t.name for t in tools}
            assert all(n.startswith("everything__") for n in names), names
            assert {"everything__echo", "everything__get-sum", "everything__trigger-long-running-operation"} <= names
            assert_tool_names_valid(tools)

            echoed = await client.call_tool("everything__echo", {"message": "through the gateway"})
            assert not echoed.is_error, echoed
            assert texts(echoed) == ["Echo: through the gateway"]

            summed = await client.call_tool("everything__get-sum", {"a": 40, "b": 2})
            assert not summed.is_error, summed
            assert 42 in numbers_in(" ".join(texts(summed))), summed

            prompts = (await client.list_prompts()).prompts
            assert "everything__simple-prompt" in {p.name for p in prompts}, [p.name for p in prompts]
            prompt = await client.get_prompt("everything__simple-prompt")
            assert texts(prompt) == ["This is a simple prompt without arguments."], prompt

            resources = (await client.list_resources()).resources
            uris = [str(r.uri) for r in resources]
            wanted = "demo://resource/static/document/instructions.md"
            matching = [u for u in uris if u.endswith(wanted)]
            assert len(matching) == 1, f"no gateway URI maps {wanted}: {uris}"
            uri = matching[0]
            assert uri != wanted, "backend resource URIs are exposed mapped (sluice://everything/...)"
            read = await client.read_resource(uri)
            assert read.contents and str(read.contents[0].uri) == uri, read
            assert isinstance(read.contents[0], types.TextResourceContents)
            assert read.contents[0].text.strip()


async def test_everything_progress_through_gateway(everything_gateway: Gateway) -> None:
    progress = ProgressLog()
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with legacy_client(everything_gateway.mcp_url) as client:
            result = await client.call_tool(
                "everything__trigger-long-running-operation",
                {"duration": 0.6, "steps": 3},
                progress_callback=progress,
            )
            assert not result.is_error, result
    assert [(p, t) for p, t, _ in progress.events] == [(1, 3), (2, 3), (3, 3)], progress.events


@pytest.mark.parametrize("isolation", ["shared", "per-session"])
async def test_everything_sampling_routed_to_client(
    gateway_factory: GatewayFactory, everything_js, isolation: str
) -> None:
    """The backend's sampling/createMessage reaches this client's callback; its answer reaches the backend."""
    gw = gateway_factory(everything_config(everything_js, isolation))
    sampler = FakeSampler(marker=f"SAMPLED-{isolation}-7f3a9c")
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with legacy_client(gw.mcp_url, sampling_callback=sampler) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            assert "everything__trigger-sampling-request" in names, (
                "server-everything registers trigger-sampling-request only when its client (the gateway) "
                f"declares the sampling capability in initialize; tools seen: {sorted(names)}"
            )
            result = await client.call_tool(
                "everything__trigger-sampling-request", {"prompt": "say the marker", "maxTokens": 16}
            )
    assert not result.is_error, result
    assert len(sampler.requests) == 1, sampler.requests
    asked = sampler.requests[0]
    assert asked.max_tokens == 16
    assert any(
        isinstance(m.content, types.TextContent) and "say the marker" in m.content.text for m in asked.messages
    ), asked
    assert any(sampler.marker in t for t in texts(result)), result


# ==========================================================================
# reference: the same SDK calls straight against server-everything (no gateway)


async def test_reference_everything_direct(everything_http) -> None:
    """Checks the peer and the SDK usage above without sluice in the path."""
    progress = ProgressLog()
    sampler = FakeSampler(marker="SAMPLED-direct-1b2c")
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with legacy_client(everything_http.mcp_url, sampling_callback=sampler) as client:
            assert client.protocol_version == "2025-11-25"
            names = {t.name for t in (await client.list_tools()).tools}
            assert {"echo", "trigger-sampling-request", "trigger-long-running-operation"} <= names, names
            assert texts(await client.call_tool("echo", {"message": "m"})) == ["Echo: m"]
            prompt = await client.get_prompt("simple-prompt")
            assert texts(prompt) == ["This is a simple prompt without arguments."]
            uri = "demo://resource/static/document/instructions.md"
            read = await client.read_resource(uri)
            assert str(read.contents[0].uri) == uri
            result = await client.call_tool(
                "trigger-long-running-operation", {"duration": 0.3, "steps": 3}, progress_callback=progress
            )
            assert not result.is_error
            sampled = await client.call_tool("trigger-sampling-request", {"prompt": "p", "maxTokens": 8})
    assert [(p, t) for p, t, _ in progress.events] == [(1, 3), (2, 3), (3, 3)]
    assert len(sampler.requests) == 1
    assert any(sampler.marker in t for t in texts(sampled))


@pytest.mark.parametrize("mode", ["auto", "2026-07-28"])
async def test_reference_sdk_modes_construct(mode: str) -> None:
    """The SDK accepts every mode the later era tests need (no connection is made)."""
    client = Client("http://127.0.0.1:9/mcp", mode=mode)
    assert client.mode == mode
    with pytest.raises(ValueError):
        Client("http://127.0.0.1:9/mcp", mode="2025-11-25")  # handshake versions go through mode="legacy"
