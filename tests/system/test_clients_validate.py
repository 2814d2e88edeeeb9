"""``openenv validate`` as a submitter runs it, on a fresh ``git clone`` of this repository's HEAD
(only what is committed counts): openenv-core 0.3.0 (what the OpenEnv hackathon tells submitters to
install; a cached throwaway venv) and openenv 0.10 (the project's venv), on the clone and with
``--url`` against a live server.

What passes where (openenv 0.10):

- ``openenv validate --skip-build``: static checks PASS, runtime ones SKIP — verdict WARN, exit 0.
- ``openenv validate`` (no flags) builds the Dockerfile and starts the image with the Docker CLI:
  its ``validation.execution`` block is what selects the runtime checks, and the CLI has no other way
  to start the server — ``run_validation`` is called without a provider, so the runner falls back to
  ``DockerValidationProvider`` (``openenv/validation/runner.py``: "if provider is None: ... provider =
  DockerValidationProvider()"), and ``ExecutionDeclaration`` (``kind: Literal["openenv_ws"]``,
  ``extra="forbid"``) declares only a probe, a Dockerfile and a context — no command, no URL. With a
  Docker engine it exits 0 (WARN: graders not implemented in 0.10 SKIP); without one, the image build
  FAILs ``runtime.startup`` (exit 1) and that is the only failure — asserted below either way.
- The runtime checks themselves: ``test_openenv_0_10_runtime_checks_pass_on_the_image`` runs the real
  runner — ``openenv.validation.run_validation``, its collector, graders and severity policy — with only
  the container provider swapped for one that runs the clone's Dockerfile steps on this machine (the
  locked, pruned dependencies, the image's ENV and CMD; the SQLite folder unwritable, as in the
  validator's read-only container; the request port standing for container port 8000 is
  ``EXTRA_PORTS``).
- ``openenv validate --url``: PASS on both versions.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import time
import urllib.request
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
from openenv.validation import run_validation
from openenv.validation.providers import ExecResult, ProviderError
from openenv.validation.types import CheckStatus, ProviderCapability, Verdict

from bench.harness import STALLED_AFTER_S, free_port
from tests.client.test_clients_venvs import OPENENV_CORE_030, client_venv
from tests.system.test_docker_start import build_image, image_env, installed, instructions, started

ROOT = Path(__file__).resolve().parents[2]
OPENENV_010 = [sys.executable, "-m", "openenv.cli"]
URL_CRITERIA = {
    "openapi_version_available",
    "health_endpoint",
    "metadata_endpoint",
    "schema_endpoint",
    "mcp_endpoint",
    "mode_endpoint_consistency",
}


@pytest.fixture(scope="module")
def fresh_clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This repository's HEAD as a submitter gets it: ``git clone``, nothing uncommitted, no venv."""
    target = tmp_path_factory.mktemp("clone") / "ecomm-support-env"
    subprocess.run(
        ["git", "clone", "--quiet", "--no-hardlinks", str(ROOT), str(target)],
        check=True,
        timeout=STALLED_AFTER_S,
        capture_output=True,
    )
    assert not (target / ".venv").exists() and (target / "uv.lock").is_file()
    return target


def _validate(cmd: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=STALLED_AFTER_S, cwd=cwd)


# ------------------------------------------------------------------------------- openenv-core 0.3.0


def test_openenv_core_0_3_0_validate_on_a_fresh_clone(fresh_clone: Path) -> None:
    python = client_venv(OPENENV_CORE_030)
    proc = _validate([str(python), "-m", "openenv.cli", "validate", str(fresh_clone), "--json"], fresh_clone)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads(proc.stdout)
    assert report["passed"] is True and report["issues"] == []


def test_openenv_core_0_3_0_validate_url(live_server: Any, tmp_path: Path) -> None:
    python = client_venv(OPENENV_CORE_030)
    proc = _validate([str(python), "-m", "openenv.cli", "validate", "--url", live_server.url], tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads(proc.stdout)
    assert report["passed"] is True
    assert {c["id"] for c in report["criteria"] if c["passed"]} >= URL_CRITERIA


# ------------------------------------------------------------------------------------ openenv 0.10


def test_openenv_0_10_validate_url(live_server: Any, tmp_path: Path) -> None:
    proc = _validate([*OPENENV_010, "validate", "--url", live_server.url, "--json"], tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads(proc.stdout)
    assert report["passed"] is True
    assert {c["id"] for c in report["criteria"] if c["passed"]} >= URL_CRITERIA


def test_openenv_0_10_validate_skip_build_passes_static_and_skips_runtime(fresh_clone: Path) -> None:
    """What a submitter without a Docker engine types: the static checks pass, the runtime ones
    are reported as SKIP (verdict WARN, exit 0) — never FAIL."""
    proc = _validate([*OPENENV_010, "validate", str(fresh_clone), "--skip-build"], fresh_clone)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "PASS  static.manifest" in proc.stdout and "Verdict: WARN" in proc.stdout
    assert "SKIP  runtime.startup" in proc.stdout and "--skip-build" in proc.stdout
    assert "FAIL " not in proc.stdout and "ERROR " not in proc.stdout


def _docker_engine() -> bool:
    docker = shutil.which("docker")
    return (
        docker is not None
        and subprocess.run([docker, "info"], capture_output=True, timeout=STALLED_AFTER_S).returncode == 0
    )


def test_openenv_0_10_plain_validate_needs_only_a_docker_engine(fresh_clone: Path) -> None:
    """``openenv validate`` with no flags: exit 0 where a Docker engine runs; elsewhere exactly one
    failure — ``runtime.startup``, because the image cannot be built without Docker — and nothing of
    the package itself fails (the static checks PASS, every other check SKIPs on that dependency)."""
    proc = _validate([*OPENENV_010, "validate", str(fresh_clone), "--json"], fresh_clone)
    report = json.loads(proc.stdout)
    results = {r["check_id"]: r for r in report["results"]}
    assert results["static.manifest"]["status"] == "pass"
    if _docker_engine():
        assert proc.returncode == 0 and report["verdict"] != "fail", proc.stdout
        assert results["runtime.state_contract"]["status"] == "pass"
        return
    assert proc.returncode == 1 and report["verdict"] == "fail"
    startup = results["runtime.startup"]
    assert startup["status"] in ("fail", "error") and "docker" in " ".join(startup["evidence"]).lower(), startup
    others = [
        r for r in report["results"] if r["check_id"] != "runtime.startup" and r["status"] not in ("pass", "skip")
    ]
    assert others == [], others


def test_openenv_0_10_manifest_declares_the_runtime_plan(fresh_clone: Path) -> None:
    from openenv.validation.manifest import NormalizedManifestV2
    from openenv.validation.parsers.openenv_yaml import OpenEnvYamlParser
    from openenv.validation.runtime.contracts import load_runtime_plan

    manifest = OpenEnvYamlParser().parse(fresh_clone)
    assert isinstance(manifest, NormalizedManifestV2)  # schema 2: runtime checks are selected
    plan = load_runtime_plan(fresh_clone, manifest.execution)
    assert plan.reset.options["task_id"] == "decision-easy" and len(plan.actions) >= 2
    assert (fresh_clone / manifest.execution.dockerfile).is_file()


def test_openenv_0_10_observation_schema_check_passes_on_a_live_server(live_server: Any) -> None:
    """openenv 0.10's own collector and ``runtime.observation_schema`` grader, without the image:
    the repository's plan plus a longer episode (lookups, a question answered by the customer, a
    decision), every reset and step observation checked against GET /schema as openenv does it
    (the nested observation with the top-level ``reward`` and ``done`` put back)."""
    from openenv.validation.graders.runtime.basic import ObservationSchemaGrader
    from openenv.validation.manifest import NormalizedManifestV2
    from openenv.validation.parsers.openenv_yaml import OpenEnvYamlParser
    from openenv.validation.runtime.collector import collect_runtime_evidence
    from openenv.validation.runtime.contracts import RuntimePlan, load_runtime_plan

    manifest = OpenEnvYamlParser().parse(ROOT)
    assert isinstance(manifest, NormalizedManifestV2)
    longer = RuntimePlan.model_validate(
        {
            "plan_schema_version": "1",
            "reset": {
                "episode_id": "schema-check-longer",
                "seed": 3,
                "options": {"task_id": "decision-medium", "split": "dev"},
            },
            "actions": [
                {"lookup": "customer"},
                {"decision": "request_info", "reply": "Could you send a photo, please?"},
                {"add_tag": "Refund"},
                {"decision": "reject", "reply": "We checked.", "close_ticket": True},
            ],
        }
    )
    for plan in (load_runtime_plan(ROOT, manifest.execution), longer):
        evidence = collect_runtime_evidence(live_server.url, plan, episode_timeout_s=60)
        assert evidence.failure_reason is None, evidence.failure_reason
        steps = [e for e in evidence.exchanges if e.operation == "step"]
        assert steps and json.loads(steps[-1].response_json)["data"]["done"] is True
        assert ObservationSchemaGrader().check(None, evidence) == []


class _Subject:
    def __init__(self, base_url: str, stack: ExitStack, log_path: Path) -> None:
        self.base_url, self._stack, self._log = base_url, stack, log_path

    def inspect(self) -> dict[str, Any]:
        return {"provider": "local-image"}

    def logs(self, max_bytes: int = 65536) -> str:
        return self._log.read_text(errors="replace")[-max_bytes:]

    def exec(self, argv: list[str], timeout_s: float) -> ExecResult:
        raise ProviderError("local-image has no exec capability")

    def stop(self) -> None:
        self._stack.close()


class LocalImageProvider:
    """openenv's validation-provider protocol over the Dockerfile's steps run on this machine."""

    name = "local-image"
    capabilities = frozenset({ProviderCapability.IMAGE_BUILD})  # no network policy, no exec: those SKIP
    supported_network_modes = frozenset({"public"})

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.log_path = tmp_path / "subject.log"

    def build(self, root: Path, execution: Any) -> str:
        self.parsed = instructions(Path(root) / execution.dockerfile)
        self.image = build_image(self.parsed, self.tmp_path, context=Path(root) / execution.context)
        digest = hashlib.sha256(
            (Path(root) / execution.dockerfile).read_bytes() + (Path(root) / "uv.lock").read_bytes()
        )
        return "sha256:" + digest.hexdigest()

    def start(self, spec: Any) -> _Subject:
        # The validator's container: root file system read-only, so the image's /data cannot be
        # written (here: /data lies under a regular file) and only /tmp (here: a temp dir) can.
        blocked = self.tmp_path / "read-only"
        blocked.write_text("a file, so nothing can be created under it\n")
        container_tmp = self.tmp_path / "container-tmp"
        container_tmp.mkdir()
        env = image_env(self.parsed, self.image, self.tmp_path / "home", data_dir=f"{blocked}/data/")
        env["SQLITE_FALLBACK_DIR"] = str(container_tmp)
        port, container_8000 = free_port(), free_port()
        env.update(PORT=str(port), EXTRA_PORTS=str(container_8000))
        stack = ExitStack()
        stack.enter_context(installed(self.image))
        proc = stack.enter_context(started(self.image, json.loads(_the(self.parsed, "CMD")), env, self.log_path))
        url = f"http://127.0.0.1:{container_8000}"
        # how long a start takes on this machine is not what is validated: the spec's own timeout, or the
        # suite's safety net when that is longer
        deadline = time.monotonic() + max(spec.startup_timeout_s, STALLED_AFTER_S)
        while True:
            if proc.poll() is not None or time.monotonic() > deadline:
                stack.close()
                raise ProviderError(f"subject did not become healthy:\n{self.log_path.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(url + "/health", timeout=1) as resp:  # noqa: S310 - loopback
                    if resp.status == 200:
                        break
            except OSError:
                time.sleep(0.2)
        return _Subject(url, stack, self.log_path)


def _the(parsed: list[tuple[str, str]], keyword: str) -> str:
    return [args for k, args in parsed if k == keyword][-1]


def test_openenv_0_10_runtime_checks_pass_on_the_image(fresh_clone: Path, tmp_path: Path) -> None:
    report = run_validation(fresh_clone, provider=LocalImageProvider(tmp_path))
    results = {r.check_id: r for r in report.results}
    explain = "\n".join(f"{r.check_id}: {r.status.value} {r.evidence}" for r in report.results)
    for check in (
        "static.manifest",
        "runtime.startup",
        "runtime.reward_well_formed",
        "runtime.state_contract",
        "runtime.observation_schema",
    ):
        assert results[check].status is CheckStatus.PASS, explain
    assert results["runtime.network_policy"].status is CheckStatus.SKIP  # this provider cannot measure it
    log = (tmp_path / "subject.log").read_text()
    assert "is not writable" in log  # the database moved to the writable fallback, as it would in Docker
    failed = [r for r in report.results if r.status in (CheckStatus.FAIL, CheckStatus.ERROR)]
    assert not failed, explain
    assert report.verdict is not Verdict.FAIL
