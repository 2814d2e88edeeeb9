"""The Dockerfile's start command works: no Docker engine is needed.

The test reads the Dockerfile, rebuilds the image's /app from its COPY lines in a temp dir, takes
its ENV (``/data`` moved into the temp dir, a free port, loopback host) and runs its CMD there —
then runs its HEALTHCHECK command until it passes. It fails if CMD, ENV, COPY or HEALTHCHECK stop
working together, and checks the deployment facts Spaces and openenv rely on.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def instructions(dockerfile: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) in order; comments dropped, line continuations joined."""
    out: list[tuple[str, str]] = []
    pending = ""
    for raw in dockerfile.read_text().splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line, pending = pending + line, ""
        keyword, _, args = line.partition(" ")
        out.append((keyword.upper(), args.strip()))
    return out


def env_of(parsed: list[tuple[str, str]]) -> dict[str, str]:
    env: dict[str, str] = {}
    for keyword, args in parsed:
        if keyword != "ENV":
            continue
        tokens = shlex.split(args)
        if "=" not in tokens[0]:  # legacy `ENV KEY value`
            env[tokens[0]] = " ".join(tokens[1:])
            continue
        for token in tokens:
            key, _, value = token.partition("=")
            env[key] = value
    return env


def the(parsed: list[tuple[str, str]], keyword: str) -> str:
    found = [args for k, args in parsed if k == keyword]
    assert found, f"Dockerfile has no {keyword}"
    return found[-1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def parsed() -> list[tuple[str, str]]:
    return instructions(ROOT / "Dockerfile")


def test_dockerfile_declares_what_spaces_and_openenv_need(parsed: list[tuple[str, str]]) -> None:
    assert the(parsed, "FROM").startswith("python:3.11-slim")
    user = the(parsed, "USER")
    run_lines = " ".join(args for k, args in parsed if k == "RUN")
    assert user == "1000" or f"--uid 1000 {user}" in run_lines, "must run as uid 1000 (Spaces)"
    env = env_of(parsed)
    assert env["PORT"] == "7860"
    assert env["DATABASE_URL"].startswith("sqlite+aiosqlite:////data/")
    assert {"7860", "8000"} <= set(the(parsed, "EXPOSE").split())
    health = the(parsed, "HEALTHCHECK")
    assert "/health" in health and "curl" not in health and "wget" not in health
    assert json.loads(the(parsed, "CMD")) == ["python", "-m", "service.app"]
    # the runtime image gets no test extras
    assert "[test]" not in run_lines and "pytest" not in run_lines


def test_dockerfile_start_command_serves_health(parsed: list[tuple[str, str]], tmp_path: Path) -> None:
    image = tmp_path / "image"
    workdir = image / the(parsed, "WORKDIR").lstrip("/")
    workdir.mkdir(parents=True)
    for keyword, args in parsed:
        if keyword != "COPY":
            continue
        *sources, dest = [a for a in shlex.split(args) if not a.startswith("--")]
        target = workdir / dest if not dest.startswith("/") else image / dest.lstrip("/")
        for src in sources:
            path = ROOT / src
            into = target / path.name if dest.endswith("/") else target
            if path.is_dir():
                shutil.copytree(path, into, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
            else:
                into.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, into)

    port = free_port()
    image_env = {k: v.replace("/data/", f"{image}/data/") for k, v in env_of(parsed).items()}
    image_env["HOME"] = str(tmp_path / "home")
    (image / "data").mkdir()  # the Dockerfile's RUN creates /data
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "DATABASE_SCHEMA", "HOST", "PORT")}
    env.update(image_env)
    # Only the port and the host change: a free port instead of 7860, loopback instead of 0.0.0.0.
    env.update(PORT=str(port), HOST="127.0.0.1", LOG_LEVEL="WARNING")
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"  # `python` = this venv

    cmd = json.loads(the(parsed, "CMD"))
    log_path = tmp_path / "server.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable if cmd[0] == "python" else cmd[0], *cmd[1:]],
            cwd=workdir, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )
    try:
        health_cmd = the(parsed, "HEALTHCHECK").split(" CMD ", 1)[1]
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, f"the start command exited:\n{log_path.read_text()[-4000:]}"
            check = subprocess.run(["sh", "-c", health_cmd], cwd=workdir, env=env, capture_output=True, timeout=20)
            if check.returncode == 0:
                break
            assert time.monotonic() < deadline, f"HEALTHCHECK never passed:\n{check.stderr!r}\n{log_path.read_text()[-4000:]}"
            time.sleep(0.3)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as resp:  # noqa: S310
            assert json.loads(resp.read()) == {"status": "healthy"}
        # the database is the image's: a SQLite file under (the stand-in for) /data, migrated
        assert (image / "data" / Path(env_of(parsed)["DATABASE_URL"].split("////data/", 1)[1])).is_file()
        req = urllib.request.Request(f"http://127.0.0.1:{port}/reset", data=b"{}", method="POST",
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as resp:  # noqa: S310
            assert resp.status == 200 and json.loads(resp.read())["done"] is False
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)  # the group of the process started above
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=5)
