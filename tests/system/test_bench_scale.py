"""The scale benchmarks at a tiny size: each runs end to end, reports its agreed JSON shape with no
errors, and leaves no process behind. No timing is asserted: the numbers are the benchmarks'
business (docs/performance.md), these only keep the scripts from rotting."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.cluster import find_haproxy
from bench.harness import STALLED_AFTER_S
from tests.conftest import PG_URL

ROOT = Path(__file__).resolve().parents[2]


def run_bench(module: str, *args: str, out: Path) -> dict:
    proc = subprocess.run(
        [sys.executable, "-m", module, *args, "--json-out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=STALLED_AFTER_S,  # a safety net for a wedged run; a tiny run ends long before
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    report = json.loads(proc.stdout)
    assert json.loads(out.read_text()) == report
    return report


def test_bench_sessions_tiny_run(tmp_path: Path) -> None:
    report = run_bench(
        "bench.sessions",
        *("--sessions", "12", "--think-s", "0.05,0.2", "--duration", "2", "--settle-s", "0.2"),
        out=tmp_path / "sessions.json",
    )
    r = report["results"]
    assert r["errors"] == 0 and r["sessions_broken"] == 0, r["error_samples"]
    assert report["config"]["sessions"] == 12 and report["config"]["max_concurrent_envs"] == 20
    assert r["active"]["steps"] > 0 and r["active"]["server_cpu_ms_per_frame"] > 0
    for phase in ("connect", "idle", "active"):
        assert isinstance(r[phase]["kb_per_session"], float)
    for key in ("p50", "p99"):
        assert r["active"]["step_latency_ms"][key] > 0 and r["resume"]["latency_ms"][key] > 0
    assert r["resume"]["sessions"] == 12
    assert r["active"]["generator_loop_lag_ms"]["p50"] is not None
    assert set(report["targets_met"]) == {"step_p99_ms<=50", "idle_kb_per_session<=50", "errors==0"}
    assert report["targets_met"]["errors==0"] is True


@pytest.mark.slow
def test_bench_workers_tiny_run(tmp_path: Path) -> None:
    report = run_bench(
        "bench.workers", *("--burners", "1", "--trials", "1", "--settle-s", "0"), out=tmp_path / "workers.json"
    )
    (trial,) = report["trials"]
    assert trial["first_200_s"] is not None and trial["all_workers_serving_s"] is not None
    assert trial["restart_serving_s"] is not None  # the SIGKILLed worker was replaced by one that serves
    assert trial["worker_kills_during_start"] == 0 and trial["worker_kills_during_restart"] == 0
    assert report["config"]["burners"] == 1 and report["config"]["workers"] == 2


@pytest.mark.slow
@pytest.mark.skipif(find_haproxy() is None, reason="needs HAProxy (Debian: apt-get install haproxy; .ci/run does)")
@pytest.mark.skipif(
    PG_URL is None, reason="replicas share one PostgreSQL: set TEST_DATABASE_URL=postgresql+asyncpg://…"
)
def test_bench_scaling_tiny_run(tmp_path: Path) -> None:
    # The benchmark counts the steps that end inside a window of --duration seconds. A busy machine may
    # end none in a short window, and CPU is read from /proc in clock ticks (10 ms), so HAProxy's few
    # milliseconds in a 1 s window can read as 0: then the run is repeated with a window twice as long
    # (the load the checks below need, not a weaker check), up to a safety net.
    duration = 1.0
    while True:
        report = run_bench(
            "bench.scaling",
            *("--replicas", "1,2", "--agents", "4", "--duration", str(duration), "--warmup", "0.3"),
            *("--database-url", str(PG_URL)),
            out=tmp_path / "scaling.json",
        )
        counted = [
            r["steps_per_s"] > 0 and r["cpu_ms_per_step"]["balancer"] > 0
            for by_transport in report["curve"].values()
            for r in by_transport.values()
        ]
        if all(counted) or duration >= STALLED_AFTER_S / 16:
            break
        duration *= 2
    assert set(report["curve"]) == {"1", "2"}
    for by_transport in report["curve"].values():
        assert set(by_transport) == {"http", "ws"}
        for r in by_transport.values():
            assert r["errors"] == 0 and r["steps_per_s"] > 0, r["error_samples"]
            ms = r["cpu_ms_per_step"]
            assert set(ms) == {"replicas", "balancer", "database_backends", "postgres_all", "generator", "machine"}
            assert ms["replicas"] > 0 and ms["balancer"] > 0 and ms["database_backends"] >= 0
            assert r["database_backends_seen"] >= 1  # the replicas' connections were traced to their backends
    assert report["per_core_from_one_replica"]["ws"]["steps_per_s_per_replica_core"] > 0
