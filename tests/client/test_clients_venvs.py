"""Throwaway virtualenvs for the clients and tools nobody on this project wrote, cached between runs.

openenv-core 0.3.0 (what the OpenEnv hackathon tells submitters to install) and openenv 0.10
(the test extras) both install the ``openenv`` package, so 0.3.0 never goes into the project's
``.venv``: it gets its own virtualenv, created once from the package registry and reused by
every later run (``make test`` stays fast). The cache lives under ``.venv/client-venvs/`` —
ignored by git, by both validators' source hashing and by the Docker build snapshot, and removed
with ``make clean`` — keyed by the requirement and this Python's version, built in a temporary
folder and renamed into place, so a crashed or concurrent build never leaves a half venv behind.

This module also checks the cache itself.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.harness import STALLED_AFTER_S

ROOT = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("CLIENT_VENV_CACHE") or ROOT / ".venv" / "client-venvs")
INSTALL_TIMEOUT_S = 900
UV = Path(sys.executable).parent / "uv"  # the test extra's

OPENENV_CORE_030 = "openenv-core==0.3.0"


def client_venv(*requirements: str, name: str | None = None, fingerprint: str = "", pip: bool = False) -> Path:
    """The ``python`` of a virtualenv holding exactly ``requirements`` (``pip install`` arguments),
    created on first use. ``fingerprint`` is what else decides its content (a requirements file's
    text when ``requirements`` name the file). uv installs them (the test extra's; ~2 s where pip took
    ~30 s of CPU for openenv-core) unless ``pip``: then the venv's own pip does, and stays in it, as in
    an image whose build runs ``pip install``."""
    installer = "pip" if pip else "uv"
    key = hashlib.sha256(
        "\n".join([sys.version.split()[0], installer, fingerprint, *requirements]).encode()
    ).hexdigest()[:12]
    name = (
        (name or "-".join(r.replace("==", "-").replace("[", "_").replace("]", "") for r in requirements)[:60])
        + "-"
        + key
    )
    target = CACHE / name
    python = target / "bin" / "python"
    if (target / ".complete").exists():
        return python
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one builder at a time; the others wait and reuse it
        if (target / ".complete").exists():
            return python
        build = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=CACHE))
        try:
            # Created at its final path's sibling and renamed: `python -m ...` works from a moved
            # venv (pyvenv.cfg sits next to bin/), console-script shebangs would not — use -m.
            venv = [sys.executable, "-m", "venv", *([] if pip else ["--without-pip"]), str(build)]
            subprocess.run(venv, check=True, timeout=STALLED_AFTER_S)
            python_in_build = str(build / "bin" / "python")
            install = (
                [python_in_build, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
                if pip
                else [str(UV), "pip", "install", "--quiet", "--python", python_in_build]
            )
            subprocess.run(
                [*install, *requirements],
                check=True,
                timeout=INSTALL_TIMEOUT_S,
                stdin=subprocess.DEVNULL,
            )
            (build / ".complete").write_text("\n".join(requirements) + "\n")
            if target.exists():
                shutil.rmtree(target)
            build.rename(target)
        finally:
            if build.exists():
                shutil.rmtree(build, ignore_errors=True)
    return python


def test_client_venv_is_built_once_and_holds_only_what_was_asked() -> None:
    python = client_venv(OPENENV_CORE_030)
    version = subprocess.run(
        [str(python), "-c", "import importlib.metadata as m; print(m.version('openenv-core'))"],
        capture_output=True,
        text=True,
        check=True,
        timeout=STALLED_AFTER_S,
    ).stdout.strip()
    assert version == "0.3.0"
    # the project's own venv keeps openenv 0.10 (both distributions install the `openenv` package)
    import importlib.metadata

    assert importlib.metadata.version("openenv").startswith("0.10.")
    before = (python.parent.parent / ".complete").stat().st_mtime_ns
    assert client_venv(OPENENV_CORE_030) == python
    assert (python.parent.parent / ".complete").stat().st_mtime_ns == before  # reused, not rebuilt
