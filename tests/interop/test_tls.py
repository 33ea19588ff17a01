"""The official MCP Python SDK over TLS (`[server] tls`, issue 41 part 3).

A CA and a server certificate for 127.0.0.1 are made here with the
`openssl` command; the gateway serves the built-in demo backend over HTTPS
with them, and the SDK's Streamable HTTP client, trusting that CA alone
(an httpx2 client with its own SSL context), lists and calls tools. Without
the CA the same client is refused at the handshake: the certificate is
verified, not waved through.
"""

from __future__ import annotations

import ssl
import subprocess
import time
from pathlib import Path

import anyio
import httpx
import httpx2
import mcp.types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from harness import Gateway, GatewayFactory, demo_backend, toml_str

pytestmark = pytest.mark.anyio

OPENSSL_TIMEOUT_S = 30


def openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=OPENSSL_TIMEOUT_S)


def make_pki(at: Path) -> tuple[Path, Path, Path]:
    """(ca.pem, cert.pem, key.pem): a CA, and a certificate it signs for IP 127.0.0.1."""
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=sluice interop CA",
            "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign",
            cwd=at)  # fmt: skip
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", "key.pem", "-out", "server.csr", "-subj", "/CN=sluice interop", cwd=at)  # fmt: skip
    (at / "ext.cnf").write_text(
        "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n"
    )
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", "cert.pem", "-days", "2", "-extfile", "ext.cnf", cwd=at)  # fmt: skip
    return at / "ca.pem", at / "cert.pem", at / "key.pem"


def start_tls_gateway(gateway_factory: GatewayFactory, sluice_bin: Path, tmp_path: Path) -> tuple[Gateway, Path]:
    ca, cert, key = make_pki(tmp_path)
    config = (
        f"[server]\ntls = {{ cert_file = {toml_str(str(cert))}, key_file = {toml_str(str(key))} }}\n"
        + demo_backend(sluice_bin)
    )
    gw = gateway_factory(config, wait_ready=False)
    assert gw.base_url.startswith("https://"), gw.stdout_lines
    trust = ssl.create_default_context(cafile=str(ca))
    deadline = time.monotonic() + 30
    while True:
        try:
            if httpx.get(gw.base_url + "/readyz", verify=trust, timeout=5).status_code == 200:
                return gw, ca
        except httpx.HTTPError:
            pass
        assert time.monotonic() < deadline, gw.stderr_tail()
        time.sleep(0.05)


async def test_the_sdk_lists_and_calls_tools_over_tls(
    gateway_factory: GatewayFactory, sluice_bin: Path, tmp_path: Path
) -> None:
    gw, ca = start_tls_gateway(gateway_factory, sluice_bin, tmp_path)
    trust = ssl.create_default_context(cafile=str(ca))
    async with httpx2.AsyncClient(verify=trust, timeout=30) as http:
        with anyio.fail_after(60):
            async with Client(streamable_http_client(gw.mcp_url, http_client=http), mode="legacy") as client:
                tools = await client.list_tools()
                assert "demo__echo" in [t.name for t in tools.tools]
                result = await client.call_tool("demo__echo", {"text": "over tls"})
                assert isinstance(result.content[0], types.TextContent)
                assert result.content[0].text == "over tls"
                added = await client.call_tool("demo__add", {"a": 2, "b": 3})
                assert added.content[0].text == "5"

    # The platform's store does not hold the test's CA: refused.
    async with httpx2.AsyncClient(timeout=10) as http:
        with anyio.fail_after(30), pytest.raises(BaseException) as refused:
            async with Client(streamable_http_client(gw.mcp_url, http_client=http), mode="legacy") as client:
                await client.list_tools()
    assert "CERTIFICATE_VERIFY_FAILED" in repr(refused.value), repr(refused.value)
