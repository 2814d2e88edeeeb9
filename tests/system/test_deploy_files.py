"""The shipped multi-replica topology — ``deploy/compose.yaml``, ``deploy/kubernetes.yaml``,
``deploy/haproxy.cfg`` — is valid and says what docs/deploying.md says it does. There is no Docker
engine or cluster here: each file is checked against its platform's published schema by a validator
installed from PyPI (check-jsonschema's copy of the Compose specification, kubernetes-validate's
Kubernetes schemas, strict), and a broken copy must fail, so the check is not vacuous."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from bench.cluster import COMPOSE_BALANCER, find_haproxy, haproxy_config
from bench.harness import STALLED_AFTER_S

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
BIN = Path(sys.executable).parent
KUBERNETES_VERSION = "1.30.0"


def validate_compose(path: Path) -> subprocess.CompletedProcess[str]:
    cmd = [str(BIN / "check-jsonschema"), "--builtin-schema", "vendor.compose-spec", str(path)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=STALLED_AFTER_S)


def validate_kubernetes(path: Path) -> subprocess.CompletedProcess[str]:
    cmd = [str(BIN / "kubernetes-validate"), "--strict", "-k", KUBERNETES_VERSION, str(path)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=STALLED_AFTER_S)


def documents(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def test_the_compose_file_follows_the_compose_specification(tmp_path: Path) -> None:
    ok = validate_compose(DEPLOY / "compose.yaml")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    compose = documents(DEPLOY / "compose.yaml")[0]
    app = compose["services"]["app"]
    assert app["deploy"]["replicas"] == COMPOSE_BALANCER["template"][1]  # type: ignore[index]
    assert app["environment"]["TRUSTED_PROXY_HOPS"] == "1" and COMPOSE_BALANCER["forwardfor"] is True
    assert app["depends_on"]["db"]["condition"] == "service_healthy"
    assert "/ready" in " ".join(app["healthcheck"]["test"])
    assert "./haproxy.cfg:/usr/local/etc/haproxy/haproxy.cfg:ro" in compose["services"]["balancer"]["volumes"]
    broken = tmp_path / "compose.yaml"
    compose["services"]["app"]["deploy"]["replicaz"] = 3
    broken.write_text(yaml.safe_dump(compose))
    assert validate_compose(broken).returncode != 0, "the validator accepted an unknown key"


def test_the_kubernetes_manifest_follows_the_kubernetes_schemas(tmp_path: Path) -> None:
    ok = validate_kubernetes(DEPLOY / "kubernetes.yaml")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    by_kind = {d["kind"]: d for d in documents(DEPLOY / "kubernetes.yaml")}
    assert set(by_kind) == {"Deployment", "Service"}
    pod = by_kind["Deployment"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    env = {e["name"]: e for e in container["env"]}
    assert env["DATABASE_URL"]["valueFrom"]["secretKeyRef"]["key"] == "DATABASE_URL"  # never a literal
    assert env["TEST_SPLIT_KEY"]["valueFrom"]["secretKeyRef"]["key"] == "TEST_SPLIT_KEY"
    assert container["readinessProbe"]["httpGet"]["path"] == "/ready"
    assert container["livenessProbe"]["httpGet"]["path"] == "/health"
    assert by_kind["Service"]["spec"]["sessionAffinity"] == "None"  # non-sticky: any replica serves any step
    assert by_kind["Deployment"]["spec"]["replicas"] >= 2
    broken = tmp_path / "kubernetes.yaml"
    container["readinessProbe"]["httpGet"]["pathh"] = "/ready"
    broken.write_text(yaml.safe_dump_all(list(by_kind.values())))
    assert validate_kubernetes(broken).returncode != 0, "the strict validator accepted an unknown field"


def test_the_shipped_haproxy_config_is_the_one_the_local_cluster_renders() -> None:
    shipped = (DEPLOY / "haproxy.cfg").read_text()
    assert shipped.split("\n", 1)[1] == haproxy_config(**COMPOSE_BALANCER)  # type: ignore[arg-type]


@pytest.mark.skipif(find_haproxy() is None, reason="needs HAProxy (Debian: apt-get install haproxy; .ci/run does)")
def test_haproxy_accepts_the_shipped_config() -> None:
    haproxy = find_haproxy()
    assert haproxy is not None and shutil.which(haproxy) is not None
    checked = subprocess.run([haproxy, "-c", "-f", str(DEPLOY / "haproxy.cfg")], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr
