"""``bench/growth.py`` at a tiny size: it builds its large database, measures every rate on both servers
with no errors, prints the agreed JSON shape, and leaves no server behind."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from bench.harness import STALLED_AFTER_S
from tests.system.test_bench_load import _alive

ROOT = Path(__file__).resolve().parents[2]
RATES = {"steps", "run_play_k1", "run_play_k8", "steps_polled", "run_play_k8_vs_k1"}


def test_bench_growth_tiny_run(tmp_path: Path) -> None:
    out = tmp_path / "growth.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.growth",
            "--runs",
            "3",
            "--episodes-per-run",
            "12",
            "--agents",
            "2",
            "--duration",
            "0.8",
            "--warmup",
            "0.2",
            "--rounds",
            "1",
            "--leaderboard-requests",
            "3",
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

    built = report["large_database"]
    assert (built["runs"], built["episodes"], built["grades"]) == (3, 36, 36) and built["transitions"] >= 36
    assert built["leaderboard_rows"] == 3  # every built run is complete, summarised and listed
    assert isinstance(report["leaderboard_ms"], float) and report["leaderboard_ms"] > 0
    assert set(report["leaderboard_first_ms"]) == {"empty", "large"}
    assert set(report["ratios"]) == RATES and set(report["results"]) == RATES
    for name, ratio in report["ratios"].items():
        assert isinstance(ratio, float) and ratio > 0, (name, ratio)
    for name, result in report["results"].items():
        labels = {"k1", "k8"} if name == "run_play_k8_vs_k1" else {"empty", "large"}
        assert set(result) == labels | {"ratio_per_round"}, name
        for label in labels:
            assert result[label].get("errors", 0) == 0, (name, label, result[label]["error_samples"])
            assert len(result[label]["rounds"]) == (
                2 if name == "run_play_k8_vs_k1" else 1
            )  # crossed: two windows a round
    pids = report["config"]["server_pids"]
    assert set(pids) == {"empty", "large"}
    assert not [name for name, pid in pids.items() if _alive(pid)], "bench/growth.py left a server running"


def test_built_episodes_are_played_by_each_familys_own_heuristic() -> None:
    """A store-desk entry of the built runs is the store heuristic's episode (it finishes well inside the cap),
    not the ticket agent's (which never calls a tool and runs into the step cap)."""
    from bench.growth import play_templates
    from service import env as core
    from service.env.agents import play_episode

    manifest, played = play_templates(12)  # seeds 0 and 1: every task, the store desk's included
    store = [p for p in played if core.TASKS[p.task_id].family == "store"]
    assert store and len(played) == len(manifest) == 12
    for p in played:
        actions = play_episode("heuristic", p.task_id, p.seed, "dev")[1]
        assert [s["action"] for s in p.steps] == [a.as_json() for a in actions], p.task_id
    assert all(len(p.steps) < core.TASKS[p.task_id].max_steps for p in store)
