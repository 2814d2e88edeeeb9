"""The built wheel is the package a user installs: it must carry every file the code reads at run time
(the reply reader's vocabulary, the store desk's phrase banks, the pages' templates and static files),
not only the Python modules — a file left out works from a checkout and fails once installed."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_the_wheel_carries_every_data_file_of_the_package(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    tracked = subprocess.run(
        ["git", "ls-files", "service", "server", "client"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    data = {path for path in tracked if not path.endswith(".py")}
    assert any(p.startswith("service/env/vocabulary/") for p in data) and any(p.endswith(".json") for p in data)
    if not (ROOT / "build").exists():  # setuptools builds in the checkout: leave it as found
        request.addfinalizer(lambda: shutil.rmtree(ROOT / "build", ignore_errors=True))
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("*.whl")
    shipped = set(zipfile.ZipFile(wheel).namelist())
    assert sorted(data - shipped) == []


def test_both_installs_compile_the_app_so_a_start_compiles_nothing(tmp_path: Path) -> None:
    """`make run`'s install and the image compile the app (and its locked dependencies) to bytecode: where
    PYTHONDONTWRITEBYTECODE is set (the image sets it) a start otherwise compiles every module again, ~3x
    the CPU of the import, which is what a worker starting on a busy machine waits for (#22 item 3)."""
    makefile, dockerfile = (ROOT / "Makefile").read_text(), (ROOT / "Dockerfile").read_text()
    command = "-m compileall -q -j 0 service server migrations"
    assert command in makefile and "--compile-bytecode -r requirements.txt" in makefile
    assert "python -m compileall -q service server migrations" in dockerfile
    env = {"PATH": "/usr/bin:/bin", "PYTHONPYCACHEPREFIX": str(tmp_path), "PYTHONDONTWRITEBYTECODE": "1"}
    subprocess.run([sys.executable, *command.split()], cwd=ROOT, env=env, check=True)
    probe = (
        "import sys, os, service.app\n"
        "mods = [m for n, m in sys.modules.items() if n.split('.')[0] in ('service', 'server')]\n"
        "missing = [m.__name__ for m in mods if getattr(m, '__cached__', None) and not os.path.exists(m.__cached__)]\n"
        "print(len(mods), missing)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    count, missing = out.stdout.split(" ", 1)
    assert int(count) > 50 and missing.strip() == "[]", out.stdout
