"""``bench/abuse.py`` at a tiny size: it runs end to end on 127.0.0.1, reports honest-alone and
honest-with-abuser side by side in the agreed JSON shape, and the abuser is actually limited."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from bench.harness import STALLED_AFTER_S

ROOT = Path(__file__).resolve().parents[2]


def test_bench_abuse_tiny_run() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "bench.abuse", "--tiny", "--limit", "10"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=STALLED_AFTER_S,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    report = json.loads(proc.stdout)
    assert report["benchmark"] == "abuse" and report["config"]["limit_per_s"] == 10
    summary = report["summary"]
    assert summary["honest_alone_steps_per_s"] > 0
    assert report["config"]["modes"] == ["paced", "flood", "pages"]
    for mode in ("paced", "flood", "pages"):
        assert set(summary[mode]) == {
            "honest_steps_per_s",
            "ratio_to_alone",
            "ratio_median_of_rounds",
            "server_cpu_s_per_s",
            "abuser_served_per_s",
            "abuser_sent_per_s",
            "drop_within_20pct",
        }
        assert summary[mode]["honest_steps_per_s"] > 0 and isinstance(summary[mode]["drop_within_20pct"], bool)
    [row] = report["rounds"]
    assert all(row[mode]["errors"] == 0 for mode in ("alone", "paced", "flood", "pages"))
    pages = row["pages"]["abuser"]
    assert pages["served"] > 0 and pages["server_errors"] == 0, pages  # the page reader's reads were answered
    flood = row["flood"]["abuser"]
    assert flood["limited"] > 0 and flood["server_errors"] == 0, flood  # the limit bites, nothing breaks
    # 2 s of flooding at 10 a second in bursts of 10 (a token bucket): at most 10 + 2 x 10 served (with
    # slack), whatever was sent — ~200 (10x the limit) here, fewer on a machine too busy to flood that fast
    assert flood["served"] <= 2 * 2 * 10 + 10 and flood["sent"] > flood["served"], flood
