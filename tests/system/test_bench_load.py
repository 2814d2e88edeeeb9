"""``bench/load.py`` at a tiny size: it must run end to end, report every target with the agreed
JSON shape and no errors, and leave no server behind. Keeps the benchmark from rotting silently."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.harness import STALLED_AFTER_S

ROOT = Path(__file__).resolve().parents[2]
TARGETS = ("ours/http", "ours/ws", "peer/ws", "ceiling/http", "ceiling/ws")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is not a running server
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.slow
def test_bench_load_tiny_run(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.load",
            "--agents",
            "4",
            "--duration",
            "1",
            "--warmup",
            "0.3",
            "--rounds",
            "1",
            "--json-out",
            str(out),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=STALLED_AFTER_S,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    report = json.loads(proc.stdout)
    assert json.loads(out.read_text()) == report

    assert report["config"]["agents"] == 4 and report["config"]["database"] == "sqlite"
    assert set(report["results"]) == set(TARGETS)
    for name in TARGETS:
        r = report["results"][name]
        assert r["errors"] == 0, (name, r["error_samples"])
        assert r["steps_per_s"] > 0 and r["episodes_per_s"] > 0, (name, r)
        for key in ("p50", "p95", "p99"):
            assert isinstance(r["step_latency_ms"][key], float) and r["step_latency_ms"][key] > 0, (name, key)
        assert r["step_latency_ms"]["p50"] <= r["step_latency_ms"]["p99"]
        assert set(r["cpu_cores"]) == {"generator", "server", "other"}
        assert r["server_rss_mb"] > 10 and r["rounds"][0]["server_rss_mb"] == r["server_rss_mb"]
        assert len(r["rounds"]) == 1
        # the families' own lines: their steps add up to the window's
        assert set(r["by_family"]) <= {"ticket", "store"} and r["by_family"], (name, r["by_family"])
        assert sum(f["steps_per_s"] for f in r["by_family"].values()) == pytest.approx(r["steps_per_s"], abs=0.5)
    # scripted agents finish real episodes: a few steps each, as the tasks allow
    assert 1 <= report["results"]["ours/http"]["mean_steps_per_episode"] <= 20
    assert set(report["ratios"]) == {
        "ours/http vs peer/ws",
        "ours/http vs ceiling/http",
        "ours/ws vs peer/ws",
        "ours/ws vs ceiling/ws",
    }
    for value in report["ratios"].values():
        assert value["steps_per_s"] > 0 and value["step_p99"] > 0

    pids = report["config"]["server_pids"]
    assert set(pids) == {"ours", "peer", "ceiling"}
    assert not [name for name, pid in pids.items() if _alive(pid)], "bench/load.py left a server running"


def test_bench_step_path_tiny_run(tmp_path: Path) -> None:
    """The in-process step-path benchmark: same episodes through the core and the service, both timed."""
    out = tmp_path / "step_path.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.step_path",
            "--episodes",
            "24",
            "--agents",
            "4",
            "--rounds",
            "2",
            "--json-out",
            str(out),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=STALLED_AFTER_S,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    report = json.loads(proc.stdout)
    assert json.loads(out.read_text()) == report
    assert report["config"]["sqlite"] == {"journal_mode": "WAL", "synchronous": "FULL"}
    for target in ("core", "service"):
        cpu = report["cpu_ms_per_step"][target]
        assert len(cpu["rounds"]) == 2 and all(x > 0 for x in cpu["rounds"]) and cpu["median"] > 0
    # persisting costs something: a service step cannot be cheaper than the core step it wraps
    assert report["service_over_core"] > 1
    assert report["service_overhead_ms_per_step"] == pytest.approx(
        report["cpu_ms_per_step"]["service"]["median"] - report["cpu_ms_per_step"]["core"]["median"], abs=1e-3
    )
    # the ticket tasks and the store desk apart, each with its own episodes and steps
    families = report["by_family"]
    assert set(families) == {"ticket", "store"}
    for line in families.values():
        assert line["steps_per_round"] > 0 and line["service_over_core"] > 1
        for target in ("core", "service"):
            assert len(line["cpu_ms_per_step"][target]["rounds"]) == 2
    assert report["steps_per_round"] == sum(line["steps_per_round"] for line in families.values())
