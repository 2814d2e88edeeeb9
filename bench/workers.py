"""Worker start and restart under load: how long ``WORKERS=N python -m service.app`` takes to serve
with every core busy, and how long a SIGKILLed worker takes to be replaced by one that serves.
Prints one JSON document.

    .venv/bin/python -m bench.workers                                  # 8 CPU burners, 2 workers, 3 trials
    .venv/bin/python -m bench.workers --server-root /tmp/before        # the same against another checkout

``--burners`` processes spin on the CPU (each bounded by ``--burn-s``, in its own session, killed
by PID at the end) while the server starts; the load average is reported. A worker is "serving"
when uvicorn logs "Application startup complete." for it (the same line before and after the
pre-fork supervisor, so ``--server-root`` can point at older code); the first 200 is the first
``GET /health`` answered. Kills are the supervisor's log lines about a worker it replaced
(uvicorn's "Child process [...] died", ours "exited (code"). A trial gives up on a wait after
``--give-up-s`` and reports null for it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from bench.harness import HOST, ServerProcess, cpu_pressure, free_port
from bench.load import log, median

STARTED = "Application startup complete."
KILL_LINES = ("Child process [", "exited (code")  # uvicorn's supervisor, then service/workers.py
BURN = "import sys, time\nend = time.monotonic() + float(sys.argv[1])\nwhile time.monotonic() < end:\n    pass\n"


def commit_of(root: Path) -> str | None:
    try:
        cmd = ["git", "rev-parse", "--short", "HEAD"]
        out = subprocess.run(cmd, cwd=root, capture_output=True, text=True, timeout=5)
    except OSError:
        return None
    return out.stdout.strip() or None


def start_burners(count: int, seconds: float) -> list[subprocess.Popen[bytes]]:
    return [subprocess.Popen([sys.executable, "-c", BURN, str(seconds)], start_new_session=True) for _ in range(count)]


def stop_burners(burners: list[subprocess.Popen[bytes]]) -> None:
    for p in burners:
        with contextlib.suppress(ProcessLookupError):
            os.kill(p.pid, signal.SIGKILL)
        p.wait()


def health_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/health", timeout=1) as resp:  # noqa: S310 - loopback
            return resp.status == 200
    except OSError:
        return False


def workers_of(pid: int) -> list[int]:
    """The supervisor's worker processes (uvicorn's resource tracker, a child too, is not one)."""
    kids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z" and b"resource_tracker" not in cmdline:
            kids.append(int(entry.name))
    return kids


def count(server: ServerProcess, needle: str | tuple[str, ...]) -> int:
    needles = (needle,) if isinstance(needle, str) else needle
    return sum(len(server.log_lines(n)) for n in needles)


def imported_at(server: ServerProcess, started: float) -> float | None:
    """Seconds from the start to the supervisor's "forking N workers" line (its log timestamp)."""
    import datetime as dt

    lines = server.log_lines("forking")
    if not lines:
        return None
    stamp = dt.datetime.strptime(lines[0][:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()
    return round(stamp - (time.time() - (time.perf_counter() - started)), 2)


def wait_until(predicate: Any, give_up_s: float) -> float | None:
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < give_up_s:
        if predicate():
            return round(time.perf_counter() - t0, 2)
        time.sleep(0.05)
    return None


def trial(args: argparse.Namespace, index: int, workdir: Path) -> dict[str, Any]:
    port = free_port()
    env = {
        **{k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "DATABASE_SCHEMA")},
        "DATABASE_URL": f"sqlite+aiosqlite:///{workdir / f'trial{index}.db'}",
        "HOST": HOST,
        "PORT": str(port),
        "WORKERS": str(args.workers),
        "LOG_LEVEL": "INFO",
        "PYTHONUNBUFFERED": "1",
        "PYTHONPATH": str(args.server_root),
    }
    cmd = [sys.executable, "-m", "service.app"]
    server = ServerProcess(f"trial{index}", cmd, port, env, workdir, cwd=args.server_root)
    try:
        started = time.perf_counter()
        first_200 = wait_until(lambda: health_ok(server.url), args.give_up_s)
        all_serving = wait_until(lambda: count(server, STARTED) >= args.workers, args.give_up_s)
        result: dict[str, Any] = {
            "first_200_s": first_200,
            "all_workers_serving_s": None if all_serving is None else round((first_200 or 0) + all_serving, 2),
            "worker_kills_during_start": count(server, KILL_LINES),
            # service/workers.py only: the supervisor's "forking" line, when the import before the fork is done
            "imported_s": imported_at(server, started),
        }
        victims = workers_of(server.proc.pid)
        if all_serving is None or not victims:
            return {**result, "restart_serving_s": None, "note": "never served: no restart measured"}
        before = count(server, STARTED)
        kills_before = count(server, KILL_LINES)
        os.kill(victims[0], signal.SIGKILL)
        result["restart_serving_s"] = wait_until(lambda: count(server, STARTED) > before, args.give_up_s)
        result["worker_kills_during_restart"] = count(server, KILL_LINES) - kills_before - 1  # less our own kill
        return result
    finally:
        server.stop()


def summarize(trials: list[dict[str, Any]], give_up_s: float) -> dict[str, Any]:
    def med(key: str) -> Any:
        vals = [t.get(key) for t in trials]
        if any(v is None for v in vals):
            return f">{give_up_s:g} (gave up in {sum(v is None for v in vals)} of {len(vals)})"
        return median([float(v) for v in vals if v is not None])

    return {
        k: med(k) for k in ("first_200_s", "all_workers_serving_s", "restart_serving_s", "worker_kills_during_start")
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="ecomm-bench-workers-"))
    load0 = os.getloadavg()
    burners = start_burners(args.burners, args.burn_s)
    trials, loads = [], []
    try:
        time.sleep(args.settle_s)  # let the load average climb before the first start
        for i in range(args.trials):
            loads.append(round(os.getloadavg()[0], 2))
            t = trial(args, i, workdir)
            log(f"trial {i + 1}/{args.trials} (load {loads[-1]}): {t}")
            trials.append(t)
    finally:
        stop_burners(burners)
        shutil.rmtree(workdir, ignore_errors=True)
    return {
        "config": {
            "workers": args.workers,
            "burners": args.burners,
            "cpus": os.cpu_count(),
            "trials": args.trials,
            "give_up_s": args.give_up_s,
            "server_root": str(args.server_root),
            "commit_of_server_root": commit_of(args.server_root),
            "loadavg_before": [round(x, 2) for x in load0],
            "cpu_pressure_at_end": cpu_pressure(),
            "loadavg_1min_at_each_trial": loads,
            "notes": [
                "serving = uvicorn's 'Application startup complete.' for that worker; first_200 = GET /health",
                "restart_serving_s: SIGKILL of one worker -> its replacement's startup complete",
                "worker_kills: workers the supervisor replaced without being asked (uvicorn: failed health checks)",
            ],
        },
        "median": summarize(trials, args.give_up_s),
        "trials": trials,
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.workers", description=__doc__.split("\n\n")[0])
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--burners", type=int, default=4 * (os.cpu_count() or 2), help="CPU-burning processes (4 per core)")
    p.add_argument("--trials", type=int, default=3)
    p.add_argument("--give-up-s", type=float, default=120.0, help="a wait longer than this is reported as null")
    p.add_argument("--settle-s", type=float, default=5.0, help="burn this long before the first start")
    p.add_argument("--burn-s", type=float, default=900.0, help="bound on every burner's life (killed earlier)")
    p.add_argument("--server-root", type=Path, default=Path(__file__).resolve().parents[1])
    p.add_argument("--json-out", type=Path, default=None)
    args = p.parse_args(argv)
    if args.workers < 2 or args.trials < 1 or args.burners < 0:
        p.error("--workers must be >= 2 (it measures the supervisor), --trials >= 1, --burners >= 0")
    args.server_root = args.server_root.resolve()
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    report = run(args)
    text = json.dumps(report, indent=2)
    print(text)
    if args.json_out is not None:
        args.json_out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
