"""The built wheel is the package a user installs: it must carry every file the code reads at run time
(the reply reader's vocabulary, the store desk's phrase banks, the pages' templates and static files),
not only the Python modules — a file left out works from a checkout and fails once installed."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_wheel_carries_every_data_file_of_the_package(tmp_path: Path) -> None:
    tracked = subprocess.run(
        ["git", "ls-files", "service", "server", "client"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    data = {path for path in tracked if not path.endswith(".py")}
    assert any(p.startswith("service/env/vocabulary/") for p in data) and any(p.endswith(".json") for p in data)
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
