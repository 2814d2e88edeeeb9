"""``WORKERS`` > 1 (``service/workers.py``): forked workers that serve, and that are replaced when
they die or hang. Every wait is on an event the supervisor logs (a worker's "serving" line, its
kill), never on a time budget: how long a start takes under load is ``bench/workers.py``'s
business, not a test's."""

from __future__ import annotations

import os
import re
import signal
import sys
import time
from pathlib import Path

import httpx
import pytest

from bench.harness import STALLED_AFTER_S
from service import env as core
from service.settings import Settings
from tests.conftest import LiveServer
from tests.system.test_scale_out import ENDINGS, STEADY

WORKFLOW = next(t.id for t in core.TASKS.values() if t.family == "workflow")
SERVING = re.compile(r"worker (\d+) \(pid (\d+)\) serving")


def serving_pids(server: LiveServer, count: int) -> list[int]:
    """The PIDs of the first ``count`` "worker … serving" lines, once there are that many."""
    lines = server.wait_for_log(") serving,", count)
    return [int(m.group(2)) for line in lines[:count] if (m := SERVING.search(line))]


def children(pid: int) -> set[int]:
    kids = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid and fields[0] != "Z":
                kids.add(int(entry.name))
    return kids


def running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def play(url: str, seed: int) -> None:
    """An episode with a new connection per request: either worker may answer any of them."""
    episode = httpx.post(url + "/reset", json={"task_id": WORKFLOW, "seed": seed}, timeout=STALLED_AFTER_S).json()[
        "observation"
    ]["episode_id"]
    for action in [*STEADY[:2], ENDINGS[1]]:
        r = httpx.post(url + "/step", json={"episode_id": episode, "action": action}, timeout=STALLED_AFTER_S)
        assert r.status_code == 200, r.text
    assert httpx.get(url + "/grader", params={"episode_id": episode}, timeout=STALLED_AFTER_S).json()["step_count"] == 3


def workers_server(settings: Settings, tmp_path: Path, **env: str) -> LiveServer:
    return LiveServer(
        settings,
        tmp_path / "workers.log",
        extra_env={"WORKERS": "2", "LOG_LEVEL": "INFO", **env},
        command=[sys.executable, "-m", "service.app"],
    )


def test_a_killed_worker_is_replaced_by_one_that_serves(settings: Settings, tmp_path: Path) -> None:
    server = workers_server(settings, tmp_path)
    try:
        first = serving_pids(server, 2)
        assert set(first) == children(server.proc.pid), "the serving workers are the supervisor's children"
        os.kill(first[0], signal.SIGKILL)
        replacement = serving_pids(server, 3)[2]
        assert replacement not in first
        assert children(server.proc.pid) == {first[1], replacement}
        assert server.log_lines(f"(pid {first[0]}) exited (code -9) after serving")
        for seed in range(4):
            play(server.url, seed)
    finally:
        server.stop()
    assert not children(server.proc.pid)


def test_a_worker_whose_event_loop_stops_is_killed_and_replaced(settings: Settings, tmp_path: Path) -> None:
    # A short timeout for the loop (it beats 4 times within it); the start is never bound by it: a start may
    # take WORKER_TIMEOUT_S + DB_START_TIMEOUT_S, here far more than any busy machine needs.
    server = workers_server(settings, tmp_path, WORKER_TIMEOUT_S="2", DB_START_TIMEOUT_S="600")
    try:
        first = serving_pids(server, 2)
        os.kill(first[0], signal.SIGSTOP)  # its loop cannot beat any more; the process is still there
        server.wait_for_log(f"(pid {first[0]}): its event loop has not run for")
        serving = server.wait_for_log(") serving,", 3)
        assert f"(pid {first[0]}) exited (code -9) after serving" in "\n".join(server.log_lines("exited"))
        assert not running(first[0])
        assert len(serving) >= 3
        play(server.url, 9)
    finally:
        server.stop()


def test_workers_that_cannot_start_stop_the_supervisor(tmp_path: Path) -> None:
    """An app that fails in every worker ends the start with one error, not an endless respawn loop."""
    blocked = tmp_path / "not-a-dir"
    blocked.write_text("a file where the database folder should be")
    broken = Settings(database_url=f"sqlite+aiosqlite:///{blocked / 'x.db'}", rate_limit_exempt="127.0.0.1")
    with pytest.raises(RuntimeError, match="exited with") as failed:
        workers_server(broken, tmp_path)
    assert "before serving and no worker has served yet: stopping" in str(failed.value)


def test_workers_do_not_outlive_a_killed_supervisor(settings: Settings, tmp_path: Path) -> None:
    """SIGKILL of the supervisor alone (not its process group): its workers stop too, none is left
    serving the socket as an orphan."""
    server = workers_server(settings, tmp_path)
    try:
        workers = serving_pids(server, 2)
        os.kill(server.proc.pid, signal.SIGKILL)
        server.proc.wait()
        deadline = time.monotonic() + STALLED_AFTER_S  # a safety net: each worker exits once it gets SIGTERM
        while alive := [pid for pid in workers if running(pid)]:
            assert time.monotonic() < deadline, f"workers {alive} outlived their supervisor"
            time.sleep(0.05)
    finally:
        server.stop()
