"""The Dockerfile's steps work: no Docker engine is needed.

The test reads the Dockerfile and runs its steps on this machine: the dependency ``RUN`` (``uv
export`` of the lock, then ``pip install --require-hashes``) into a throwaway virtualenv — cached
per exported requirement set, so only a lock change reinstalls —, the image's ``/app`` rebuilt
from its ``COPY`` lines in a temp dir and installed as its second ``RUN`` does, its ``ENV`` (``/data``
moved into the temp dir, free ports, loopback host), its ``CMD``, then its ``HEALTHCHECK`` (exec
form, as written) until it passes. So the service is proved to run from exactly the locked,
pruned dependency set the image gets — not from the development venv. It also checks the lock is
in step with pyproject.toml and the deployment facts Spaces and openenv rely on.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import time
import tomllib
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bench.harness import STALLED_AFTER_S, free_port
from tests.client.test_clients_venvs import CACHE, UV, client_venv

ROOT = Path(__file__).resolve().parents[2]


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


def runs(parsed: list[tuple[str, str]]) -> list[list[str]]:
    """Each RUN as its `&&`-separated shell commands."""
    return [[part.strip() for part in args.split("&&")] for k, args in parsed if k == "RUN"]


PARSED = instructions(ROOT / "Dockerfile")


@pytest.fixture(scope="module")
def parsed() -> list[tuple[str, str]]:
    return PARSED


def test_dockerfile_declares_what_spaces_and_openenv_need(parsed: list[tuple[str, str]]) -> None:
    assert the(parsed, "FROM").startswith("python:3.11-slim")
    user = the(parsed, "USER")
    run_lines = " ".join(args for k, args in parsed if k == "RUN")
    assert user == "1000" or f"--uid 1000 {user}" in run_lines, "must run as uid 1000 (Spaces)"
    env = env_of(parsed)
    assert env["PORT"] == "7860" and env["EXTRA_PORTS"] == "8000"  # Spaces and openenv's container port
    assert env["DATABASE_URL"].startswith("sqlite+aiosqlite:////data/")
    assert {"7860", "8000"} <= set(the(parsed, "EXPOSE").split())
    health = the(parsed, "HEALTHCHECK")
    exec_form = json.loads(health.split(" CMD ", 1)[1])  # hadolint DL3025: exec form, a JSON array
    assert isinstance(exec_form, list) and "/health" in " ".join(exec_form)
    assert "curl" not in health and "wget" not in health
    assert json.loads(the(parsed, "CMD")) == ["server"]  # [project.scripts] server = server.app:main
    # the runtime image gets no test extras
    assert "[test]" not in run_lines and "pytest" not in run_lines


def test_image_dependencies_come_from_the_lock(parsed: list[tuple[str, str]]) -> None:
    deps = runs(parsed)[0]
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    uv_pin = next(d for d in pyproject["project"]["optional-dependencies"]["test"] if d.startswith("uv=="))
    assert f'pip install "{uv_pin}"' in deps  # the image's uv is the one the tests use
    export = next(c for c in deps if c.startswith("uv export"))
    assert "--frozen" in export and "--no-dev" in export  # exactly the lock, never re-resolved
    assert "--group build" in export  # the build backend too: the project is built with the locked setuptools
    assert any(c.startswith("pip install --no-deps --require-hashes -r ") for c in deps)
    assert "--no-build-isolation" in runs(parsed)[1][0]  # no isolated build env fetching its own setuptools
    assert not any("pyproject.toml" in c or "tomllib" in c for c in deps)  # no second source of versions
    copied = [shlex.split(args)[:-1] for k, args in parsed if k == "COPY"][0]
    assert "uv.lock" in copied and "pyproject.toml" in copied
    assert pyproject["project"]["scripts"]["server"] == "server.app:main"


def test_lock_is_in_step_with_pyproject() -> None:
    proc = subprocess.run(
        [str(UV), "lock", "--check"], cwd=ROOT, capture_output=True, text=True, timeout=STALLED_AFTER_S
    )
    assert proc.returncode == 0, f"uv.lock is stale; run `uv lock`:\n{proc.stderr[-2000:]}"


# ------------------------------------------------------------------------- the image, run here


@dataclass
class Image:
    """The image's file system (``root``, ``/app`` at ``workdir``), its Python (``bin``) and the
    Dockerfile's command that installs the project into it (``install``)."""

    root: Path
    workdir: Path
    bin: Path
    install: list[str]


def offline_pip_env() -> dict[str, str]:
    """This process's environment with every package source pip could reach removed (no index, no
    find-links, no config file): an install that needs anything not already installed fails."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update(PIP_NO_INDEX="1", PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1")
    return env


def build_backend_pin() -> str:
    """The one setuptools the project builds with: ``[build-system] requires``, also the lock's ``build`` group."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    [pin] = pyproject["build-system"]["requires"]
    assert pyproject["dependency-groups"]["build"] == [pin]
    return pin


def locked_python(parsed: list[tuple[str, str]], context: Path) -> Path:
    """A venv with what the Dockerfile's dependency RUN installs, by running its `uv export` (with
    the tests' uv) and its `pip install` (into the venv) — cached per exported requirement set."""
    deps = runs(parsed)[0]
    export = shlex.split(next(c for c in deps if c.startswith("uv export")))
    out = export.index("--output-file")
    exported = context / "requirements.txt"
    export[out + 1] = str(exported)
    subprocess.run([str(UV), *export[1:]], cwd=context, check=True, capture_output=True, timeout=STALLED_AFTER_S)
    # the header comment names the output path (a temp dir): it must not change the cache key
    text = "".join(line for line in exported.read_text().splitlines(keepends=True) if not line.startswith("#"))
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    CACHE.mkdir(parents=True, exist_ok=True)
    stable = CACHE / f"image-requirements-{digest}.txt"  # a stable path: the venv key names it
    if not stable.exists():
        stable.write_text(text)
    install = shlex.split(next(c for c in deps if c.startswith("pip install --no-deps --require-hashes")))
    args = [a if a != "/tmp/requirements.txt" else str(stable) for a in install[2:]]
    return client_venv(*args, name="image-deps", fingerprint=text, pip=True)  # pip, as the Dockerfile installs


def build_image(parsed: list[tuple[str, str]], tmp_path: Path, context: Path = ROOT) -> Image:
    """The image's file system, its ``COPY`` sources taken from ``context`` (the build context)."""
    image = tmp_path / "image"
    workdir = image / the(parsed, "WORKDIR").lstrip("/")
    workdir.mkdir(parents=True)
    for keyword, args in parsed:
        if keyword != "COPY":
            continue
        *sources, dest = [a for a in shlex.split(args) if not a.startswith("--")]
        target = workdir / dest if not dest.startswith("/") else image / dest.lstrip("/")
        for src in sources:
            path = context / src
            into = target / path.name if dest.endswith("/") else target
            if path.is_dir():
                shutil.copytree(path, into, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
            else:
                into.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, into)
    python = locked_python(parsed, workdir)
    install = shlex.split(runs(parsed)[1][0])  # the second RUN's first command: the project, in /app
    assert install[:2] == ["pip", "install"] and install[-2:] == ["-e", "."]
    (image / "data").mkdir()  # the Dockerfile's RUN creates /data
    return Image(image, workdir, python.parent, install)


@contextmanager
def installed(image: Image) -> Iterator[None]:
    """The Dockerfile's project install, as written, run in the image's /app — with no package index
    or other source reachable, so it can only use what the locked install put there (a build with
    isolation would fetch an unpinned setuptools, and fails here). One editable install per cached
    venv at a time (another test run may be using the same venv)."""
    with open(CACHE / "image-deps.install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        proc = subprocess.run(
            [str(image.bin / "python"), "-m", *image.install[:2], "--quiet", *image.install[2:]],
            cwd=image.workdir,
            env=offline_pip_env(),
            capture_output=True,
            text=True,
            timeout=STALLED_AFTER_S,
        )
        assert proc.returncode == 0, f"the image's `{' '.join(image.install)}` failed offline:\n{proc.stderr[-3000:]}"
        yield


def image_env(parsed: list[tuple[str, str]], image: Image, home: Path, data_dir: str = "/data/") -> dict[str, str]:
    """The container's environment: the image's ENV only (nothing of the host's but PATH), with
    /data moved to ``data_dir`` and loopback instead of 0.0.0.0."""
    env = {k: v.replace("/data/", data_dir) for k, v in env_of(parsed).items()}
    env.update(HOME=str(home), HOST="127.0.0.1", PATH=f"{image.bin}{os.pathsep}/usr/bin:/bin", LOG_LEVEL="WARNING")
    return env


@contextmanager
def started(image: Image, cmd: list[str], env: dict[str, str], log_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [str(image.bin / cmd[0]) if (image.bin / cmd[0]).exists() else cmd[0], *cmd[1:]],
            cwd=image.workdir,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)  # the group of the process started above
            try:
                proc.wait(timeout=10)  # then SIGKILL: a cleanup, not something this test checks
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=STALLED_AFTER_S)


def installed_distributions(python: Path) -> dict[str, dict[str, Any]]:
    """What ``pip inspect`` reports in this venv, by normalized project name (PEP 503)."""
    report = json.loads(
        subprocess.run(
            [str(python), "-m", "pip", "inspect", "--local"],
            capture_output=True,
            text=True,
            check=True,
            timeout=STALLED_AFTER_S,
        ).stdout
    )
    return {re.sub(r"[-_.]+", "-", d["metadata"]["name"]).lower(): d for d in report["installed"]}


def test_image_serves_from_the_locked_dependencies(parsed: list[tuple[str, str]], tmp_path: Path) -> None:
    image = build_image(parsed, tmp_path)
    port, extra = free_port(), free_port()
    env = image_env(parsed, image, tmp_path / "home", data_dir=f"{image.root}/data/")
    env.update(PORT=str(port), EXTRA_PORTS=str(extra))  # only the ports change: free ones instead of 7860/8000
    log_path = tmp_path / "server.log"
    with installed(image):
        # Inside the install lock: the cached venv's editable install is this test's /app (the test
        # that installed it last may have been another one, with its own temp dir).
        dists = installed_distributions(image.bin / "python")
        assert not {"openenv", "openenv-core", "gradio"} & dists.keys()  # pruned: the service never imports them
        # the build backend is the locked one (every build resolves it the same): it built /app offline above
        assert dists["setuptools"]["metadata"]["version"] == build_backend_pin().split("==", 1)[1]
        project = dists["ecomm-support-env"]
        assert project["direct_url"]["dir_info"].get("editable") is True
        assert project["direct_url"]["url"] == image.workdir.resolve().as_uri()
        with started(image, json.loads(the(parsed, "CMD")), env, log_path) as proc:
            health = json.loads(the(parsed, "HEALTHCHECK").split(" CMD ", 1)[1])
            deadline = time.monotonic() + STALLED_AFTER_S  # a safety net: the loop ends when the check passes
            while True:
                assert proc.poll() is None, f"the start command exited:\n{log_path.read_text()[-4000:]}"
                check = subprocess.run(
                    [str(image.bin / health[0]), *health[1:]],
                    cwd=image.workdir,
                    env=env,
                    capture_output=True,
                    timeout=STALLED_AFTER_S,
                )
                if check.returncode == 0:
                    break
                assert time.monotonic() < deadline, (
                    f"HEALTHCHECK never passed:\n{check.stderr!r}\n{log_path.read_text()[-4000:]}"
                )
                time.sleep(0.3)
            for p in (port, extra):  # both ports answer: Spaces' 7860 and openenv's 8000
                with urllib.request.urlopen(f"http://127.0.0.1:{p}/health", timeout=STALLED_AFTER_S) as resp:
                    assert json.loads(resp.read()) == {"status": "healthy"}
            # the database is the image's: a SQLite file under (the stand-in for) /data, migrated
            assert (image.root / "data" / Path(env_of(parsed)["DATABASE_URL"].split("////data/", 1)[1])).is_file()
            req = urllib.request.Request(
                f"http://127.0.0.1:{extra}/reset",
                data=b"{}",
                method="POST",
                headers={"Content-Type": "application/json"},
            )
            with urllib.request.urlopen(req, timeout=STALLED_AFTER_S) as resp:  # noqa: S310 - loopback
                assert resp.status == 200 and json.loads(resp.read())["done"] is False
