"""Messages a user can act on (issue 20, item 8): an LLM that cannot be reached is named, with the
error's first line, and the evaluation stops after a few consecutive failures instead of playing
every episode; a 200 that is not a chat completion is a clear error; the progress line shows the real
running mean. The stdout contract ([START]/[STEP]/[END]) is unchanged: every line still matches."""

from __future__ import annotations

import re
import socket
from pathlib import Path
from typing import Any

from bench.stub_openai import StubLLM
from client import llm as llm_module
from service import env as core
from tests.client.test_inference import END_RE, classify, llm_env, run_inference


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed again when this returns: nothing listens there


def test_an_unreachable_llm_is_named_and_the_run_stops_after_a_few_failures(live_server: Any, tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1"
    env = {"API_BASE_URL": url, "HF_TOKEN": "t", "INFERENCE_STATE_DIR": str(tmp_path / "runs")}
    proc = run_inference(["--direct", "--limit-per-task", "10", "--concurrency", "4"], live_server.url, extra_env=env)
    assert proc.returncode == 1, proc.stderr[-2000:]
    classify(proc.stdout)  # whatever was printed is whole lines of the contract
    ends = [line for line in proc.stdout.splitlines() if line.startswith("[END]")]
    assert 0 < len(ends) < 60, len(ends)  # it stopped: not all 60 episodes were played
    assert url in proc.stderr and "ConnectionRefusedError" in proc.stderr, proc.stderr[-2000:]
    assert f"{llm_module.MAX_CONSECUTIVE_FAILURES} LLM calls in a row failed" in proc.stderr, proc.stderr[-2000:]
    assert proc.stderr.count("WARNING") <= 8, proc.stderr  # not one warning per episode of the split


def test_a_200_that_is_not_a_chat_completion_is_a_clear_error(live_server: Any, tmp_path: Path) -> None:
    with StubLLM(default_kind="html") as stub:
        proc = run_inference(["--direct", "--limit-per-task", "2"], live_server.url, extra_env=llm_env(stub, tmp_path))
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "AttributeError" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert stub.url in proc.stderr and "not a chat completion" in proc.stderr, proc.stderr[-2000:]
    assert "Welcome to our router" in proc.stderr  # what it did answer, so the user sees what is wrong
    classify(proc.stdout)


def test_the_progress_line_shows_the_real_running_mean(live_server: Any, tmp_path: Path) -> None:
    """A run withholds every verdict until it completes: the progress line says so while it plays
    (never "mean score 0.000"), then shows the run's real mean, the mean of the [END] scores."""
    env = {"INFERENCE_STATE_DIR": str(tmp_path / "runs")}
    proc = run_inference(["--agent", "heuristic", "--limit-per-task", "3"], live_server.url, extra_env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    scores = [float(m["score"]) for line in proc.stdout.splitlines() if (m := END_RE.match(line))]
    assert len(scores) == 3 * len(core.TASKS) and sum(scores) > 0
    progress = [line for line in proc.stderr.splitlines() if "episodes" in line and "mean score" in line]
    assert progress, proc.stderr
    assert not any("mean score 0.000" in line for line in progress), progress
    final = re.search(r"mean score (\d\.\d{3})", progress[-1])
    assert final is not None and abs(float(final.group(1)) - sum(scores) / len(scores)) < 0.01, (progress, scores)
    # direct mode knows each score as its episode ends: the running mean is shown as it goes
    proc = run_inference(["--agent", "heuristic", "--direct", "--limit-per-task", "3"], live_server.url, extra_env=env)
    direct = [line for line in proc.stderr.splitlines() if "mean score" in line]
    assert direct and all(re.search(r"mean score \d\.\d{3}", line) for line in direct), direct
    assert not any("mean score 0.000" in line for line in direct[1:]), direct
