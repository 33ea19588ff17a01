"""Search mode (issue 51) with real servers behind the gateway and the
official MCP Python SDK as its client.

server-everything, server-filesystem and server-memory (the npm packages
in package.json) run over stdio behind one namespace in search mode: the
client lists only `search_tools`, `call_tool` and the pin; searches find
each server's tools by what they do; `call_tool` reaches the right
server and its result is that server's own; with `expose_found` the
found tools join the session's list.
"""

from __future__ import annotations

import json
from pathlib import Path

import mcp.types as types
import pytest
from mcp import Client

from harness import NODE_MODULES, everything_stdio_backend, locate_everything_js, node_bin, toml_str

pytestmark = pytest.mark.anyio


def server_js(package: str) -> Path:
    js = NODE_MODULES / "@modelcontextprotocol" / package / "dist" / "index.js"
    if not js.is_file():
        pytest.fail(f"{js} is missing: run `npm ci` in tests/interop (scripts/test does)")
    return js


def config(tmp_path: Path) -> str:
    shared = tmp_path / "shared"
    shared.mkdir()
    node = toml_str(node_bin())
    return (
        everything_stdio_backend(locate_everything_js())
        + f"[backends.filesystem]\ncommand = {node}\n"
        + f"args = [{toml_str(str(server_js('server-filesystem')))}, {toml_str(str(shared))}]\n"
        + f"[backends.memory]\ncommand = {node}\nargs = [{toml_str(str(server_js('server-memory')))}]\n"
        + f"env = {{ MEMORY_FILE_PATH = {toml_str(str(tmp_path / 'memory.jsonl'))} }}\n"
        + '[namespaces.default]\nbackends = ["everything", "filesystem", "memory"]\n'
        + 'discovery = "search"\npinned = ["filesystem__list_allowed_directories"]\nexpose_found = true\n'
    )


def found(result: types.CallToolResult) -> list[str]:
    assert not result.is_error, result
    assert result.structured_content is not None
    text = [b.text for b in result.content if isinstance(b, types.TextContent)]
    assert json.loads(text[0]) == result.structured_content
    return [t["name"] for t in result.structured_content["tools"]]


def text_of(result: types.CallToolResult) -> str:
    assert not result.is_error, result
    return "\n".join(b.text for b in result.content if isinstance(b, types.TextContent))


async def test_real_servers_behind_search_mode(gateway_factory, tmp_path: Path) -> None:
    gw = gateway_factory(config(tmp_path))
    async with Client(gw.mcp_url, mode="legacy", cache=None, read_timeout_seconds=30) as client:
        listed = [t.name for t in (await client.list_tools()).tools]
        assert listed == ["search_tools", "call_tool", "filesystem__list_allowed_directories"]

        # Each server's tools are found by what they do.
        for query, want in [
            ("read the contents of a text file", "filesystem__read_text_file"),
            ("add two numbers together", "everything__get-sum"),
            ("search the knowledge graph for nodes", "memory__search_nodes"),
        ]:
            names = found(await client.call_tool("search_tools", {"query": query, "limit": 5}))
            assert names[0] == want, (query, names)

        # call_tool reaches the right server, whose result comes back whole.
        summed = await client.call_tool("call_tool", {"name": "everything__get-sum", "arguments": {"a": 2, "b": 3}})
        assert "5" in text_of(summed)
        path = str(tmp_path / "shared" / "note.txt")
        written = await client.call_tool(
            "call_tool",
            {"name": "filesystem__write_file", "arguments": {"path": path, "content": "searched, then written"}},
        )
        text_of(written)
        read = await client.call_tool("call_tool", {"name": "filesystem__read_text_file", "arguments": {"path": path}})
        assert "searched, then written" in text_of(read)
        created = await client.call_tool(
            "call_tool",
            {
                "name": "memory__create_entities",
                "arguments": {"entities": [{"name": "sluice", "entityType": "gateway", "observations": ["searches"]}]},
            },
        )
        text_of(created)
        nodes = await client.call_tool("call_tool", {"name": "memory__search_nodes", "arguments": {"query": "sluice"}})
        assert "gateway" in text_of(nodes)

        # expose_found: what the searches found is now in this session's list.
        listed = [t.name for t in (await client.list_tools()).tools]
        assert listed[:3] == ["search_tools", "call_tool", "filesystem__list_allowed_directories"]
        for name in ["filesystem__read_text_file", "everything__get-sum", "memory__search_nodes"]:
            assert name in listed, listed
        # ... and callable as native tools.
        assert "7" in text_of(await client.call_tool("everything__get-sum", {"a": 3, "b": 4}))
