"""deploy/kubernetes (issue 52): every manifest is valid against the
Kubernetes API's schemas, and what the manifests tell the binary (config,
environment, secrets as files, port, probe paths, scrape path and token,
grace period) is what the binary does.

* Schemas: kubernetes-validate (PyPI; the API's OpenAPI schemas, strict:
  an unknown field is an error) for Kubernetes' own kinds at the oldest
  version the manifests claim (1.30: the preStop sleep action) and the
  newest the package knows; the kubernetes-models packages (npm,
  tests/kubernetes/validate.mjs) for every kind again and for the
  ServiceMonitor, a Prometheus Operator CRD.
* Behaviour: `sluice serve` started with the ConfigMap's sluice.toml and the
  Deployment's environment, the Secret's keys written to files where the
  `_FILE` variables point, on 127.0.0.1 instead of the Deployment's 0.0.0.0
  (only the address: the port must be the one the manifests name); the
  probes' paths, the Service's and ServiceMonitor's port and path are then
  asked of it. The cluster variant needs a Redis to serve, so `sluice
  check` judges its config and environment.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import tomllib
from pathlib import Path

import httpx
import kubernetes_validate
import pytest
import yaml

from harness import REPO_ROOT, start_gateway, stop_gateway

MANIFESTS = REPO_ROOT / "deploy" / "kubernetes"
VARIANTS = ["standalone", "cluster"]
# The oldest Kubernetes the manifests are for (the preStop sleep action
# came in 1.30) and the newest the schema package holds.
KUBERNETES_VERSIONS = ["1.30.0", kubernetes_validate.latest_version()]
VALIDATOR = REPO_ROOT / "tests" / "kubernetes" / "validate.mjs"
IMAGE_BINARY = "/usr/local/bin/sluice"


def documents(path: Path) -> list[dict]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d is not None]


def all_files() -> list[Path]:
    return sorted(MANIFESTS.rglob("*.yaml"))


def variant(name: str) -> dict[str, dict]:
    """The objects one variant applies (common/ and its own), by kind."""
    objects: dict[str, dict] = {}
    for path in sorted((MANIFESTS / "common").glob("*.yaml")) + sorted((MANIFESTS / name).glob("*.yaml")):
        for doc in documents(path):
            assert doc["kind"] not in objects, f"two {doc['kind']} in {name}"
            objects[doc["kind"]] = doc
    return objects


def test_every_manifest_is_valid_against_the_kubernetes_schemas() -> None:
    files = all_files()
    assert {p.parent.name for p in files} == {"common", *VARIANTS}
    checked = set()
    for path in files:
        for doc in documents(path):
            if doc["apiVersion"].startswith("monitoring.coreos.com/"):
                continue  # a CRD: validate.mjs below
            for version in KUBERNETES_VERSIONS:
                try:
                    kubernetes_validate.validate(doc, version, strict=True)
                except kubernetes_validate.ValidationError as e:
                    pytest.fail(f"{path.relative_to(REPO_ROOT)}: {doc['kind']} at {version}: {e.message} at {list(e.path)}")
            checked.add(doc["kind"])
    assert checked >= {
        "Deployment", "Service", "ConfigMap", "Secret", "PodDisruptionBudget",
        "HorizontalPodAutoscaler", "NetworkPolicy",
    }


def test_every_manifest_is_valid_against_kubernetes_models_and_the_servicemonitor_crd() -> None:
    if not (VALIDATOR.parent / "node_modules").is_dir():
        pytest.fail("tests/kubernetes/node_modules is missing: scripts/test installs it (npm ci)")
    files = all_files()
    proc = subprocess.run(
        ["node", str(VALIDATOR), *map(str, files)], capture_output=True, text=True, timeout=120, check=False
    )
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    bad = [line for line in lines if line["errors"]]
    assert proc.returncode == 0 and not bad, f"{bad}\n{proc.stderr}"
    assert len(lines) == sum(len(documents(p)) for p in files)
    assert "ServiceMonitor" in {line["kind"] for line in lines}


def container(objects: dict[str, dict]) -> dict:
    (c,) = objects["Deployment"]["spec"]["template"]["spec"]["containers"]
    return c


PLACEHOLDER = "REPLACE-ME"


def secret_values(objects: dict[str, dict], sluice_bin: Path) -> dict[str, str]:
    """The Secret's values, each placeholder made real as its comment says:
    a key from `sluice keygen`, random tokens under the same names."""
    values = {}
    for key, value in objects["Secret"]["stringData"].items():
        assert PLACEHOLDER in value, f"{key}: a real secret in the manifest?"
        if key == "session-keys":
            value = subprocess.run([str(sluice_bin), "keygen"], capture_output=True, text=True, check=True).stdout.strip()
        else:
            value = ",".join(
                (e.split("=", 1)[0] + "=" if "=" in e else "") + secrets.token_hex(16) for e in value.split(",")
            )
        values[key] = value
    return values


def secret_files(objects: dict[str, dict], c: dict, values: dict[str, str], tmp_path: Path) -> dict[str, Path]:
    """The Secret's keys written where the container would see them, under
    tmp_path: {path in the container: path here}."""
    pod = objects["Deployment"]["spec"]["template"]["spec"]
    secret = objects["Secret"]
    (volume,) = [v for v in pod["volumes"] if v.get("secret", {}).get("secretName") == secret["metadata"]["name"]]
    (mount,) = [m for m in c["volumeMounts"] if m["name"] == volume["name"]]
    here = tmp_path / "secrets"
    here.mkdir()
    files = {}
    for key, value in values.items():
        (here / key).write_text(value)
        files[f"{mount['mountPath']}/{key}"] = here / key
    return files


def manifest_env(c: dict, files: dict[str, Path], sluice_bin: Path) -> dict[str, str]:
    """The Deployment's environment, `_FILE` paths moved to the files here.
    Every variable must be a literal value: nothing else is needed."""
    env = {}
    for var in c["env"]:
        value = var["value"]
        if var["name"].endswith("_FILE"):
            assert value in files, f"{var['name']}={value} names no key of the Secret"
            value = str(files[value])
        env[var["name"]] = value
    return env


def manifest_config(objects: dict[str, dict], c: dict, sluice_bin: Path) -> tuple[str, str]:
    """The ConfigMap's sluice.toml (the file the container's --config names),
    with the image's binary path turned into this one's."""
    args = c["args"]
    config_path = args[args.index("--config") + 1]
    (mount,) = [m for m in c["volumeMounts"] if config_path.startswith(m["mountPath"] + "/")]
    key = config_path[len(mount["mountPath"]) + 1 :]
    text = objects["ConfigMap"]["data"][key]
    assert IMAGE_BINARY in text
    return text.replace(IMAGE_BINARY, str(sluice_bin)), config_path


class Pod:
    """One variant's container as the kubelet would start it, here: its
    config text, its environment, the Secret's files under tmp_path."""

    def __init__(self, name: str, sluice_bin: Path, tmp_path: Path) -> None:
        self.objects = variant(name)
        self.container = container(self.objects)
        self.secrets = secret_values(self.objects, sluice_bin)
        files = secret_files(self.objects, self.container, self.secrets, tmp_path)
        self.env = manifest_env(self.container, files, sluice_bin)
        self.config, _ = manifest_config(self.objects, self.container, sluice_bin)


def seconds(duration: str) -> float:
    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}
    for unit in sorted(units, key=len, reverse=True):
        if duration.endswith(unit):
            return float(duration[: -len(unit)]) * units[unit]
    raise ValueError(duration)


@pytest.mark.parametrize("name", VARIANTS)
def test_the_grace_period_outlasts_the_drain(name: str) -> None:
    objects = variant(name)
    pod = objects["Deployment"]["spec"]["template"]["spec"]
    config = tomllib.loads(objects["ConfigMap"]["data"]["sluice.toml"])
    grace = seconds(config["server"]["shutdown_grace"])
    pre_stop = container(objects)["lifecycle"]["preStop"]["sleep"]["seconds"]
    assert pod["terminationGracePeriodSeconds"] > pre_stop + grace


@pytest.mark.parametrize("name", VARIANTS)
def test_ports_and_paths_agree_across_the_manifests(name: str) -> None:
    objects = variant(name)
    c = container(objects)
    env = {v["name"]: v["value"] for v in c["env"]}
    (port,) = c["ports"]
    # The port the gateway listens on is the container's, which the probes,
    # the Service and the ServiceMonitor name.
    assert env["SLUICE_SERVER__LISTEN"] == f"0.0.0.0:{port['containerPort']}"
    for probe in ("readinessProbe", "livenessProbe"):
        assert c[probe]["httpGet"]["port"] in (port["name"], port["containerPort"])
    (svc_port,) = objects["Service"]["spec"]["ports"]
    assert svc_port["targetPort"] in (port["name"], port["containerPort"])
    (endpoint,) = objects["ServiceMonitor"]["spec"]["endpoints"]
    assert endpoint["port"] == svc_port["name"]
    selector = objects["Deployment"]["spec"]["template"]["metadata"]["labels"]
    for kind in ("Service",):
        assert objects[kind]["spec"]["selector"].items() <= selector.items()
    for kind in ("PodDisruptionBudget", "NetworkPolicy"):
        key = "selector" if kind == "PodDisruptionBudget" else "podSelector"
        assert objects[kind]["spec"][key]["matchLabels"].items() <= selector.items()
    assert objects["ServiceMonitor"]["spec"]["selector"]["matchLabels"].items() <= objects["Service"]["metadata"]["labels"].items()
    target = objects["HorizontalPodAutoscaler"]["spec"]["scaleTargetRef"]
    assert (target["kind"], target["name"]) == ("Deployment", objects["Deployment"]["metadata"]["name"])


def test_the_standalone_manifests_run_the_binary(sluice_bin: Path, tmp_path: Path) -> None:
    pod = Pod("standalone", sluice_bin, tmp_path)
    objects, c, values, env, config = pod.objects, pod.container, pod.secrets, pod.env, pod.config
    # The one change: loopback, on an ephemeral port (the port itself is
    # the manifests' business, checked above).
    assert env.pop("SLUICE_SERVER__LISTEN").startswith("0.0.0.0:")
    gw = start_gateway(sluice_bin, tmp_path, config, env=env)
    try:
        gw.wait_ready()
        base = gw.base_url
        for probe in ("readinessProbe", "livenessProbe"):
            path = c[probe]["httpGet"]["path"]
            assert httpx.get(base + path, timeout=10).status_code == 200, path
        (endpoint,) = objects["ServiceMonitor"]["spec"]["endpoints"]
        creds = endpoint["authorization"]["credentials"]
        assert creds["name"] == objects["Secret"]["metadata"]["name"]
        token = values[creds["key"]]
        scrape = httpx.get(base + endpoint["path"], headers={"authorization": f"Bearer {token}"}, timeout=10)
        assert scrape.status_code == 200 and "sluice_client_sessions_live" in scrape.text
        assert httpx.get(base + endpoint["path"], timeout=10).status_code == 401
        # The tokens file holds the principals clients present.
        alice = values["tokens"].split(",")[0].split("=", 1)[1]
        ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        headers = {"accept": "application/json, text/event-stream"}
        assert httpx.post(gw.mcp_url, json=ping, headers=headers, timeout=10).status_code == 401
        init = {
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
        }
        opened = httpx.post(gw.mcp_url, json=init, headers=dict(headers, authorization=f"Bearer {alice}"), timeout=10)
        assert opened.status_code == 200, opened.text
    finally:
        problems = stop_gateway(gw)
    assert not problems, f"{problems}\n{gw.stderr_tail()}"


def test_the_cluster_manifests_pass_sluice_check(sluice_bin: Path, tmp_path: Path) -> None:
    pod = Pod("cluster", sluice_bin, tmp_path)
    objects, values, env, config = pod.objects, pod.secrets, pod.env, pod.config
    path = tmp_path / "sluice.toml"
    path.write_text(config)
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SLUICE_") and not k.startswith("REDIS_")}
    proc = subprocess.run(
        [str(sluice_bin), "check", "--config", str(path)],
        env=clean | env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    # The one warning: plain TCP beyond loopback (TLS is the ingress's or
    # the mesh's, or [server] tls: docs/deploy.md).
    problems = out.split("problems:\n", 1)[1].splitlines() if "problems:" in out else []
    assert all("in plain TCP" in p for p in problems), out
    for want in ("sealed", "0.0.0.0:7400", "SLUICE_SERVER__LISTEN", "redis"):
        assert want in out, f"{want!r} not in:\n{out}"
    # No secret in check's output.
    for value in values.values():
        for part in value.split(","):
            assert part.split("=", 1)[-1] not in out
