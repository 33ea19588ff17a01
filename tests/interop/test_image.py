"""The container image (issue 52): what deploy/container/build makes serves
MCP from its own root filesystem.

scripts/test's "container image" section builds the image
(`deploy/container/build --profile image-test`) and runs this file with
SLUICE_IMAGE naming it; the interop run skips it (no SLUICE_IMAGE). These
hosts can build images but not run containers, so the image is mounted
(`podman image mount`) and its binary started in its root with chroot, as
the image's user, with the image's own environment, entrypoint, command and
config; only the listen address is moved to 127.0.0.1. Like a container runtime,
the test lays a writable overlay on the image's root and gives it /dev's
usual nodes and a /proc; nothing else is added. The official Python
SDK then lists and calls tools through it, and the image's config (user,
entrypoint, port, labels) is read with `podman image inspect`.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import mcp.types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from harness import Gateway, start_gateway, stop_gateway

IMAGE = os.environ.get("SLUICE_IMAGE")
pytestmark = pytest.mark.skipif(
    not IMAGE, reason="SLUICE_IMAGE is not set: scripts/test's container image section runs this file"
)

BINARY = "/usr/local/bin/sluice"
# Everything the runtime root may hold: the binary, the files /etc needs
# for a user, name resolution and TLS, the default config. No shell, no
# libc, no package manager.
EXPECTED_FILES = {
    "usr/local/bin/sluice",
    "etc/passwd",
    "etc/group",
    "etc/nsswitch.conf",
    "etc/sluice/sluice.toml",
    "etc/ssl/certs/ca-certificates.crt",
}
PODMAN_TIMEOUT_S = 120


def podman(*args: str) -> str:
    proc = subprocess.run(
        ["podman", *args], capture_output=True, text=True, timeout=PODMAN_TIMEOUT_S, check=False
    )
    if proc.returncode != 0:
        raise RuntimeError(f"podman {' '.join(args)}: exit {proc.returncode}: {proc.stderr.strip()}")
    return proc.stdout


@pytest.fixture(scope="module")
def config() -> dict:
    assert IMAGE
    return json.loads(podman("image", "inspect", IMAGE))[0]["Config"]


@pytest.fixture(scope="module")
def root() -> Iterator[Path]:
    """The image's root filesystem, mounted for this module and unmounted after."""
    assert IMAGE
    if os.geteuid() != 0:
        pytest.skip("mounting an image and chroot need root (rootless: run under `podman unshare`)")
    try:
        path = Path(podman("image", "mount", IMAGE).strip())
    except RuntimeError as e:
        pytest.skip(f"images cannot be mounted here: {e}")
    try:
        yield path
    finally:
        podman("image", "unmount", IMAGE)


@pytest.fixture(scope="module")
def rootfs(root: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The root a container runtime gives the process: the image's, writable
    on top (overlay), with the device nodes every OCI runtime provides
    (/dev/null for children's stdio, /dev/urandom: a static binary's
    getrandom finds no libc symbol and reads the file) and a /proc."""
    base = tmp_path_factory.mktemp("rootfs")
    merged = base / "merged"
    for d in ("upper", "work", "merged"):
        (base / d).mkdir()
    mounted: list[Path] = []

    def mount(target: Path, *args: str) -> None:
        subprocess.run(["mount", *args, str(target)], check=True, capture_output=True, text=True, timeout=30)
        mounted.append(target)

    try:
        try:
            mount(merged, "-t", "overlay", "overlay", "-o", f"lowerdir={root},upperdir={base / 'upper'},workdir={base / 'work'}")
        except subprocess.CalledProcessError as e:
            pytest.skip(f"cannot mount an overlay on the image's root here: {e.stderr.strip()}")
        assert not (merged / "dev").exists() and not (merged / "proc").exists()
        (merged / "dev").mkdir()
        (merged / "proc").mkdir()
        for dev in ("null", "zero", "random", "urandom"):
            (merged / "dev" / dev).touch()
            mount(merged / "dev" / dev, "--bind", f"/dev/{dev}")
        mount(merged / "proc", "-t", "proc", "proc")
        yield merged
    finally:
        for target in reversed(mounted):
            subprocess.run(["umount", str(target)], check=False, timeout=30)


def user_ids(config: dict) -> tuple[int, int]:
    uid, _, gid = config["User"].partition(":")
    return int(uid), int(gid or uid)


def test_image_config_runs_the_binary_as_a_numeric_non_root_user(config: dict) -> None:
    uid, gid = user_ids(config)  # int(): a name would not satisfy runAsNonRoot
    assert uid != 0 and gid != 0, config["User"]
    assert config["Entrypoint"] == [BINARY]
    assert config["Cmd"] == ["serve", "--config", "/etc/sluice/sluice.toml"]
    assert set(config["ExposedPorts"]) == {"7400/tcp"}
    assert "Healthcheck" not in config or not config["Healthcheck"], "probes belong to the orchestrator"
    labels = config["Labels"]
    for key in ("source", "version", "revision", "licenses"):
        assert labels.get(f"org.opencontainers.image.{key}"), f"label {key} missing: {labels}"
    assert labels["org.opencontainers.image.licenses"] == "Apache-2.0"


def test_root_holds_the_binary_and_nothing_like_a_shell(root: Path, config: dict) -> None:
    files = {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() or p.is_symlink()}
    assert files == EXPECTED_FILES
    assert not (root / "bin" / "sh").exists()
    # The labels name what the binary says it is.
    version = run_in_root(root, config, "--version").strip()
    labels = config["Labels"]
    want = f"sluice {labels['org.opencontainers.image.version']} ({labels['org.opencontainers.image.revision']})"
    assert version == want


def run_in_root(root: Path, config: dict, *args: str) -> str:
    proc = subprocess.run(
        chroot_command(root, config) + list(args), capture_output=True, text=True, timeout=30, check=True
    )
    return proc.stdout


def chroot_command(root: Path, config: dict, env: dict[str, str] | None = None) -> list[str]:
    """argv running the image's entrypoint in its root as its user, with only
    the image's environment (plus `env`): env and chroot each exec the next."""
    uid, gid = user_ids(config)
    image_env = dict(e.split("=", 1) for e in config.get("Env") or [])
    image_env.update(env or {})
    chroot = shutil.which("chroot")
    assert chroot, "chroot (coreutils) not found"
    return [
        "/usr/bin/env",
        "-i",
        *(f"{k}={v}" for k, v in image_env.items()),
        chroot,
        f"--userspec={uid}:{gid}",
        str(root),
        *config["Entrypoint"],
    ]


def proc_field(pid: int, name: str) -> str:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(name + ":"):
            return line.split(":", 1)[1].split()[0]
    raise AssertionError(f"/proc/{pid}/status has no {name}")


@pytest.fixture
def image_gateway(rootfs: Path, config: dict, tmp_path: Path) -> Iterator[tuple[Gateway, str]]:
    """The image's own command (`serve --config /etc/sluice/sluice.toml`:
    the demo backend behind bearer tokens) with a token and 127.0.0.1."""
    token = secrets.token_hex(16)
    cmd = config["Cmd"]
    assert cmd[0] == "serve"
    gw = start_gateway(
        Path(BINARY),
        tmp_path,
        command=chroot_command(rootfs, config, {"SLUICE_TOKENS": f"ci={token}", "RUST_LOG": "info"}),
        extra_args=cmd[1:],
    )
    try:
        yield gw, token
    finally:
        problems = stop_gateway(gw)
        assert not problems, f"{problems}\n{gw.stderr_tail()}"


@pytest.mark.anyio
async def test_the_image_serves_mcp_from_its_own_root(
    image_gateway: tuple[Gateway, str], rootfs: Path, config: dict
) -> None:
    gw, token = image_gateway
    gw.wait_ready()
    # The gateway runs in the image's root as the image's user, and so does
    # the demo backend it started from the image's binary.
    uid, _ = user_ids(config)
    kids = [int(p) for p in Path(f"/proc/{gw.pid}/task/{gw.pid}/children").read_text().split()]
    assert kids, "the demo backend was not started"
    for pid in [gw.pid, *kids]:
        assert Path(f"/proc/{pid}/root").resolve() == rootfs.resolve()
        assert int(proc_field(pid, "Uid")) == uid
    assert os.readlink(f"/proc/{kids[0]}/exe").endswith(BINARY)

    # The default config requires a token from beyond loopback.
    async with httpx.AsyncClient(timeout=10) as http:
        bare = await http.post(gw.mcp_url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert bare.status_code == 401

    with anyio.fail_after(60):
        async with httpx.AsyncClient(headers={"authorization": f"Bearer {token}"}, timeout=30) as http:
            async with Client(streamable_http_client(gw.mcp_url, http_client=http), mode="legacy") as client:
                names = {t.name for t in (await client.list_tools()).tools}
                assert {"demo__echo", "demo__add"} <= names, names
                echoed = await client.call_tool("demo__echo", {"text": "from the image"})
                assert not echoed.is_error
                assert [b.text for b in echoed.content if isinstance(b, types.TextContent)] == ["from the image"]
                added = await client.call_tool("demo__add", {"a": 2, "b": 40})
                assert not added.is_error
                assert added.structured_content == {"sum": 42}
