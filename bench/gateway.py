"""A gateway started for one of the by-hand measurements (`heads.py`,
`reuse.py`, `withheld.py`): its config written to a temporary file, its
port picked by the kernel, ready once `/readyz` answers; stopped by PID."""

import os
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def start(binary, config):
    """`sluice serve` on a free loopback port with `config` (TOML, without
    `listen`) after its `[server]` line; returns the process and its base URL."""
    port = free_port()
    path = os.path.join(tempfile.mkdtemp(prefix="sluice-bench-"), "sluice.toml")
    with open(path, "w") as f:
        f.write(config.replace("[server]\n", f'[server]\nlisten = "127.0.0.1:{port}"\n', 1))
    proc = subprocess.Popen(
        [binary, "serve", "--config", path],
        stdout=subprocess.DEVNULL,
        env=dict(os.environ, SLUICE_LOG="warn"),
    )
    base = f"http://127.0.0.1:{port}"
    for _ in range(200):
        try:
            urllib.request.urlopen(base + "/readyz", timeout=1).read()
            return proc, base
        except Exception:
            time.sleep(0.1)
    stop(proc)
    raise SystemExit("the gateway did not get ready")


def stop(proc):
    """SIGTERM, then SIGKILL after 15 s."""
    if proc is None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
