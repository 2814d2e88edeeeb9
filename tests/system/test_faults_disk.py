"""A full disk under load: nothing acknowledged is lost, and the same process recovers when space returns.

The SQLite file lives on a real small file system (a tmpfs mounted for the test, unmounted after). A
filler file takes all but a little of its space, the service's own writes use up the rest, and every
write that then needs a new page (or journal room) fails with SQLITE_FULL, the way a full ``/data``
volume fails; deleting the filler is "space returns". Checked in both journal modes the service supports (WAL, the
default, and DELETE, the one for network file systems):

- in-process, through ``Database.write``: a job is reported committed only if it is stored, and a
  job reported failed is not stored;
- over HTTP, 16 agents against a live server: every acknowledged step (a 200 with
  ``metadata.step_index``) is stored exactly once at that index (plain SQL on the file), failures are
  503/507 problem details with ``Retry-After``, the log has one line per failure (few tracebacks), and
  after the filler is deleted the same server process serves steps again.

Mounting needs root (CI runs as root); elsewhere these tests skip and say why.
"""

from __future__ import annotations

import asyncio
import errno
import os
import random
import sqlite3
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from sqlalchemy import insert, select, update

from bench.harness import STALLED_AFTER_S
from service import env as core
from service.db.errors import DatabaseFault
from service.db.migrate import upgrade_to_head
from service.db.models import episodes, transitions, utcnow
from service.lib.problems import fault_status
from service.settings import Settings
from tests.conftest import LiveServer
from tests.db.test_sqlite_engine import _one_batch
from tests.system.test_durability import Ack, assert_not_corrupt, load_database, next_action, token_for

JOURNAL_MODES = ["WAL", "DELETE"]
DISK_SIZE = "48m"


# ---- a small disk and something that keeps it full -------------------------------------------------


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A tmpfs of DISK_SIZE mounted for this test only (unmounted afterwards)."""
    mount_point = tmp_path / "disk"
    mount_point.mkdir()
    if os.geteuid() != 0:
        pytest.skip("the disk-full fault needs root to mount a small tmpfs (mount -t tmpfs); CI runs as root")
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={DISK_SIZE}", "tmpfs", str(mount_point)],
        capture_output=True,
        text=True,
        timeout=STALLED_AFTER_S,
    )
    if mounted.returncode != 0:
        pytest.skip(
            f"cannot mount a small tmpfs here ({mounted.stderr.strip() or mounted.returncode}); "
            f"the disk-full fault needs one"
        )
    try:
        yield mount_point
    finally:
        if subprocess.run(["umount", str(mount_point)], capture_output=True, timeout=STALLED_AFTER_S).returncode != 0:
            subprocess.run(
                ["umount", "-l", str(mount_point)], capture_output=True, timeout=STALLED_AFTER_S
            )  # detach; freed when unused


def fill_disk(directory: Path, leave: int) -> Path:
    """Fill the file system with a filler file, then give ``leave`` bytes back; returns the filler.

    What is left is used up by the service's own writes, as on a small ``/data`` volume that fills:
    SQLite then fails part-way through batches, not only at their first page. Deleting the filler is
    "space returns"."""
    filler = directory / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        # A server running beside the filler frees blocks too (a DELETE-mode journal is removed after each
        # commit), so the disk may have room again right after ENOSPC: fill until it is seen full.
        full = False
        for _ in range(50):
            for size in (1 << 20, 1 << 16, 1 << 12):
                try:
                    while True:
                        os.write(fd, b"\0" * size)
                except OSError as exc:
                    if exc.errno != errno.ENOSPC:
                        raise
            full = os.statvfs(directory).f_bavail == 0
            if full:
                break
    finally:
        os.close(fd)
    assert full, "the filler could not fill the disk"
    os.truncate(filler, max(0, filler.stat().st_size - leave))
    return filler


def logged_tracebacks(log: str) -> int:
    """Tracebacks in a log, a chained one (``raise … from …``) counted once."""
    chained = log.count("The above exception was the direct cause of the following exception:")
    chained += log.count("During handling of the above exception, another exception occurred:")
    return log.count("Traceback (most recent call last)") - chained


def stored_by_request(db_file: Path) -> dict[tuple[str, str], list[int]]:
    """(episode_id, request_id) -> every step_index stored for it, read with plain SQL."""
    conn = sqlite3.connect(f"file:{db_file}?mode=ro", uri=True)
    try:
        out: dict[tuple[str, str], list[int]] = {}
        for episode_id, request_id, step_index in conn.execute(
            "SELECT episode_id, request_id, step_index FROM transitions"
        ):
            out.setdefault((episode_id, request_id), []).append(step_index)
        return out
    finally:
        conn.close()


# ---- in process: Database.write on a full disk -------------------------------------------------------


@pytest.mark.parametrize("journal_mode", JOURNAL_MODES)
async def test_database_write_on_a_full_disk_reports_exactly_what_it_stored(
    journal_mode: str, small_disk: Path
) -> None:
    settings = Settings.from_env(
        {"DATABASE_URL": f"sqlite+aiosqlite:///{small_disk / 'data' / 'w.db'}", "SQLITE_JOURNAL_MODE": journal_mode}
    )
    db = settings.database()
    now = utcnow()
    n_episodes = 120

    def create(conn) -> None:
        for i in range(n_episodes):
            conn.execute(
                insert(episodes).values(
                    id=f"ep-{i}",
                    task_id="t",
                    split="dev",
                    seed=i,
                    ticket_id="x",
                    run_id=None,
                    status="active",
                    step_count=0,
                    state={"pad": "x" * 1500},
                    version=1,
                    created_at=now,
                    updated_at=now,
                )
            )

    def step(conn, i: int, k: int) -> tuple[int, int]:
        """A step write: guarded bump of the episode, then its transition."""
        bumped = conn.execute(
            update(episodes)
            .where(episodes.c.id == f"ep-{i}", episodes.c.step_count == k - 1)
            .values(step_count=k, state={"pad": "y" * 1500, "k": k})
        ).rowcount
        if bumped != 1:
            raise AssertionError(f"ep-{i} is not at step {k - 1}: an acknowledged step was lost")
        conn.execute(
            insert(transitions).values(
                episode_id=f"ep-{i}",
                step_index=k,
                request_id=f"r{i}-{k}",
                action={},
                observation={"o": "z" * 500},
                reward=0.0,
                done=False,
                created_at=now,
            )
        )
        return i, k

    steps = [0] * n_episodes  # acknowledged steps per episode
    acked: list[tuple[int, int]] = []
    statuses: Counter[object] = Counter()

    async def wave() -> None:
        tasks = [asyncio.ensure_future(db.write(step, i, steps[i] + 1)) for i in range(n_episodes)]
        # each write is bounded by its own wait (DB_*_TIMEOUT_S); STALLED_AFTER_S only catches a hang
        done, pending = await asyncio.wait(tasks, timeout=STALLED_AFTER_S)
        for task in pending:
            task.cancel()
        statuses["unanswered"] += len(pending)
        for i, task in enumerate(tasks):
            if task not in done:
                continue
            if task.exception() is None:
                acked.append(task.result())
                steps[i] += 1
            else:
                exc = task.exception()
                statuses[fault_status(exc) if isinstance(exc, DatabaseFault) else type(exc).__name__] += 1

    filler = small_disk / "filler"
    try:
        await upgrade_to_head(db)
        await db.write(create)
        fill_disk(small_disk, leave=96 * 1024)
        for _ in range(6):
            await wave()
        during = len(acked)
        filler.unlink()  # space returns
        for _ in range(3):
            await wave()
        stored = await db.read(
            lambda c: {
                (int(e[3:]), k) for e, k in c.execute(select(transitions.c.episode_id, transitions.c.step_index))
            }
        )
    finally:
        filler.unlink(missing_ok=True)
        await db.dispose()

    lost = [a for a in acked if a not in stored]
    print(
        f"\nDatabase.write on a full disk [{journal_mode}]: {len(acked)} acknowledged ({during} while full), "
        f"{len(stored)} stored, {len(lost)} acknowledged but lost; failures {dict(statuses)}"
    )
    assert statuses["unanswered"] == 0, "a write was never answered"
    assert not lost, f"{len(lost)} of {len(acked)} acknowledged writes were not stored: {lost[:5]}"
    assert stored == set(acked), f"stored but reported failed: {sorted(stored - set(acked))[:5]}"
    assert sum(v for k, v in statuses.items() if k != "unanswered") > 0, "no write failed: the disk was never full"
    assert set(statuses) - {"unanswered"} <= {507}, f"a full disk must fail writes as disk-full (507): {dict(statuses)}"
    assert len(acked) - during >= 3 * n_episodes, "writes did not all succeed again once space returned"


# ---- over HTTP: 16 agents, a live server, a disk that fills and empties --------------------------------

AGENTS = 16
ROOM_LEFT = 256 * 1024  # what the filler leaves for the service's own writes to use up
FULL_ANSWERS = 2 * AGENTS  # 507s seen before space returns: the disk is full and writes are refused
MAX_REQUESTS_PER_AGENT = 20_000  # a safety net for a wedged test; the phases end on what the agents see
RETRYABLE = (503, 507)
BEFORE, FULL, FREED = "before", "full", "freed"


@dataclass
class Phases:
    """What the agents see, by phase of the disk (set by the test; an answer is counted in the phase
    its request was sent in): the test moves on when the agents have seen what it waits for, however
    long that takes — not after a fixed time."""

    now: str = BEFORE
    stop: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    acked: Counter[tuple[str, int]] = field(default_factory=Counter)  # (phase, agent) -> steps acknowledged
    full_answers: Counter[str] = field(default_factory=Counter)  # phase -> 507 answers

    def count(self, phase: str, agent: int, status: int) -> None:
        with self.lock:
            if status == 200:
                self.acked[(phase, agent)] += 1
            elif status == 507:
                self.full_answers[phase] += 1

    def agents_acked(self, phase: str) -> int:
        with self.lock:
            return sum(1 for (p, _), n in self.acked.items() if p == phase and n > 0)

    def wait(self, what: str, reached) -> None:
        """Until ``reached()`` (a safety net of STALLED_AFTER_S turns "never" into a failure)."""
        deadline = time.monotonic() + STALLED_AFTER_S
        while not reached():
            assert time.monotonic() < deadline, f"the agents never saw {what}: {self.acked}, 507s {self.full_answers}"
            assert not self.stop.is_set(), f"the agents stopped before {what}"
            time.sleep(0.02)


@dataclass
class AgentRecord:
    agent: int
    acks: list[tuple[str, Ack]] = field(default_factory=list)  # (phase its request was sent in, ack)
    failures: Counter[int] = field(default_factory=Counter)  # status of every 503/507 answer
    bad: list[str] = field(default_factory=list)  # answers that are neither a success nor a 503/507 problem


def _check_problem(resp: httpx.Response, record: AgentRecord) -> None:
    """A 503/507 must be a problem document with a detail and Retry-After."""
    if not resp.headers.get("content-type", "").startswith("application/problem+json"):
        record.bad.append(f"{resp.status_code} without application/problem+json")
    elif not resp.json().get("detail"):
        record.bad.append(f"{resp.status_code} problem without a detail")
    if not resp.headers.get("retry-after", "").isdigit():
        record.bad.append(f"{resp.status_code} without Retry-After")


def play_through_faults(url: str, prefix: str, record: AgentRecord, phases: Phases, rng: random.Random) -> None:
    """reset → steps, each retried with its request_id after a 503/507 until it is answered, until the
    test says stop."""
    client = httpx.Client(base_url=url, timeout=STALLED_AFTER_S)  # a safety net: every answer is awaited
    requests = 0

    def send(path: str, body: dict) -> tuple[str, httpx.Response] | None:
        nonlocal requests
        while not phases.stop.is_set() and requests < MAX_REQUESTS_PER_AGENT:
            requests += 1
            phase = phases.now
            try:
                resp = client.post(path, json=body)
            except httpx.TransportError as exc:
                record.bad.append(f"{path}: {type(exc).__name__}")
                return None
            if path == "/step":
                phases.count(phase, record.agent, resp.status_code)
            if resp.status_code not in RETRYABLE:
                return phase, resp
            record.failures[resp.status_code] += 1
            _check_problem(resp, record)
            time.sleep(0.02)
        return None

    try:
        n_episode = 0
        current: str | None = None
        acked_here = 0
        while not phases.stop.is_set() and requests < MAX_REQUESTS_PER_AGENT:
            if current is None:
                episode_id = f"{prefix}-a{record.agent:02d}-e{n_episode:03d}"
                n_episode += 1
                args = {
                    "episode_id": episode_id,
                    "episode_token": token_for(episode_id),
                    "task_id": list(core.TASKS)[(record.agent + n_episode) % len(core.TASKS)],
                    "seed": rng.randrange(10_000),
                }
                sent = send("/reset", args)
                if (
                    sent is not None
                    and sent[1].status_code == 409
                    and sent[1].json()["type"].endswith("episode-exists")
                ):
                    sent = send(
                        "/reset", {"episode_id": episode_id, "resume": True, "episode_token": token_for(episode_id)}
                    )  # stored after all: go on with it
                if sent is None:
                    return
                resp = sent[1]
                if resp.status_code != 200:
                    record.bad.append(f"reset {resp.status_code} {resp.text[:160]}")
                    continue
                current, acked_here = episode_id, resp.json()["metadata"].get("step_count", 0)
            request_id = f"{current}-r{acked_here + 1:03d}-{rng.randrange(10**6)}"
            action = next_action(rng)
            sent = send(
                "/step",
                {
                    "episode_id": current,
                    "episode_token": token_for(current),
                    "action": action,
                    "request_id": request_id,
                },
            )
            if sent is None:
                return
            phase, resp = sent
            if resp.status_code == 200:
                body = resp.json()
                record.acks.append(
                    (
                        phase,
                        Ack(current, body["metadata"]["step_index"], request_id, action, body["reward"], body["done"]),
                    )
                )
                acked_here = body["metadata"]["step_index"]
                if body["done"]:
                    current = None
            elif resp.status_code == 409 and resp.json()["type"].endswith("episode-finished"):
                current = None
            else:
                record.bad.append(f"step {resp.status_code} {resp.text[:160]}")
                current = None  # this episode's history is in doubt: start another
    finally:
        client.close()


@pytest.mark.parametrize("journal_mode", JOURNAL_MODES)
async def test_a_full_disk_under_load_loses_no_acknowledged_step(
    journal_mode: str, small_disk: Path, tmp_path: Path
) -> None:
    """16 agents step while the disk fills and empties. Each phase lasts until the agents have seen what
    it is for: every agent served; then, with the disk full, FULL_ANSWERS steps refused as disk-full
    (507); then, with the space back, every agent served again — on a slow machine the phases are only
    longer."""
    db_file = small_disk / "data" / "test.db"
    settings = Settings(
        database_url=f"sqlite+aiosqlite:///{db_file}",
        max_concurrent_envs=256,
        ws_idle_timeout_s=30.0,
        baseline_seeds_per_task=1,
    )
    server = LiveServer(settings, tmp_path / "server.log", extra_env={"SQLITE_JOURNAL_MODE": journal_mode})
    filler = small_disk / "filler"
    records = [AgentRecord(i) for i in range(AGENTS)]
    phases = Phases()
    threads = [
        threading.Thread(
            target=play_through_faults,
            args=(server.url, journal_mode, r, phases, random.Random(r.agent)),
            daemon=True,
        )
        for r in records
    ]
    try:
        for t in threads:
            t.start()
        phases.wait("every agent served", lambda: phases.agents_acked(BEFORE) == AGENTS)
        fill_disk(small_disk, leave=ROOM_LEFT)
        phases.now = FULL
        phases.wait(f"{FULL_ANSWERS} steps refused as disk-full", lambda: phases.full_answers[FULL] >= FULL_ANSWERS)
        filler.unlink()  # space returns; the same server process must carry on
        phases.now = FREED
        phases.wait("every agent served once space returned", lambda: phases.agents_acked(FREED) == AGENTS)
        phases.stop.set()
        for t in threads:
            t.join(timeout=STALLED_AFTER_S)
        assert not any(t.is_alive() for t in threads), "an agent hung"
        alive = server.proc.poll() is None
        ready = httpx.get(server.url + "/ready", timeout=STALLED_AFTER_S).status_code if alive else None
    finally:
        phases.stop.set()
        filler.unlink(missing_ok=True)
        server.stop()

    acks = [ack for r in records for _, ack in r.acks]
    during = sum(1 for r in records for phase, _ in r.acks if phase == FULL)
    after = sum(1 for r in records for phase, _ in r.acks if phase == FREED)
    failures = sum((r.failures for r in records), Counter())
    bad = [b for r in records for b in r.bad]
    stored = stored_by_request(db_file)
    lost = [a for a in acks if stored.get((a.episode_id, a.request_id)) != [a.step_index]]
    log = (tmp_path / "server.log").read_text(errors="replace")
    tracebacks = logged_tracebacks(log)
    print(
        f"\ndisk full under load [{journal_mode}]: {len(acks)} steps acknowledged "
        f"({during} sent while full, {after} after space returned), "
        f"{len(acks) - len(lost)} of them stored exactly once at their index, {len(lost)} lost; failures answered "
        f"{dict(failures)}, {len(bad)} other answers; server log {len(log.splitlines())} lines, {tracebacks} tracebacks"
    )

    assert not lost, (
        f"{len(lost)} of {len(acks)} acknowledged steps are not stored exactly once at their index: {lost[:3]}"
    )
    assert not bad, f"{len(bad)} answers were not 200/503/507 problems: {Counter(b[:60] for b in bad).most_common(4)}"
    assert phases.full_answers[FULL] >= FULL_ANSWERS  # what the full phase waited for
    assert alive, "the server process died"
    assert ready == 200, f"GET /ready answered {ready} after space returned"
    assert tracebacks <= 2, (
        f"{tracebacks} tracebacks in the log: failures must log one line each, tracebacks rate-limited"
    )
    database = await load_database(settings)
    for ep in database.values():
        assert_not_corrupt(ep)


# ---- in process: one batch with jobs that fit and one that does not ---------------------------------

MIXED_EPISODES = 40
HUGE = 4_000_000  # one transition this big spills SQLite's page cache mid-statement: SQLITE_FULL on the small disk


@pytest.mark.parametrize("journal_mode", JOURNAL_MODES)
async def test_a_batch_with_a_job_that_hits_sqlite_full_commits_the_jobs_that_fit(
    journal_mode: str, small_disk: Path
) -> None:
    """The disk keeps 768 kB free. Each batch holds 40 small steps and one write that cannot fit; its
    statement fails with SQLITE_FULL and SQLite rolls the whole transaction back. That job alone fails
    (507), the others run again in a new transaction and commit — until the small writes use the rest
    of the disk too. Every acknowledged job is stored exactly once; no failed job is stored."""
    settings = Settings.from_env(
        {"DATABASE_URL": f"sqlite+aiosqlite:///{small_disk / 'data' / 'm.db'}", "SQLITE_JOURNAL_MODE": journal_mode}
    )
    db = settings.database()
    now = utcnow()

    def create(conn) -> None:
        for i in range(MIXED_EPISODES):
            conn.execute(
                insert(episodes).values(
                    id=f"ep-{i}",
                    task_id="t",
                    split="dev",
                    seed=i,
                    ticket_id="x",
                    run_id=None,
                    status="active",
                    step_count=0,
                    state={"k": 0},
                    version=1,
                    created_at=now,
                    updated_at=now,
                )
            )

    def step(conn, i: int, k: int, size: int = 1500) -> tuple[int, int]:
        bumped = conn.execute(
            update(episodes)
            .where(episodes.c.id == f"ep-{i}", episodes.c.step_count == k - 1)
            .values(step_count=k, state={"k": k})
        ).rowcount
        if bumped != 1:
            raise AssertionError(f"ep-{i} is not at step {k - 1}: an acknowledged step was lost")
        conn.execute(
            insert(transitions).values(
                episode_id=f"ep-{i}",
                step_index=k,
                request_id=f"r{i}-{k}",
                action={},
                observation={"o": "z" * size},
                reward=0.0,
                done=False,
                created_at=now,
            )
        )
        return i, k

    def huge(conn, n: int) -> str:
        conn.execute(
            insert(transitions).values(
                episode_id="ep-0",
                step_index=100_000 + n,
                request_id=f"huge-{n}",
                action={},
                observation={"o": "z" * HUGE},
                reward=0.0,
                done=False,
                created_at=now,
            )
        )
        return f"huge-{n}"

    steps = [0] * MIXED_EPISODES
    acked: list[tuple[int, int]] = []
    waves: list[tuple[int, Counter[object]]] = []  # (acknowledged, failures by status) per batch

    async def batch(with_huge: bool) -> None:
        jobs = [db.write(step, i, steps[i] + 1) for i in range(MIXED_EPISODES)]
        if with_huge:
            jobs.insert(MIXED_EPISODES // 2, db.write(huge, len(waves)))  # never stored: it cannot fit
        outcomes = await _one_batch(db, jobs)
        if with_huge:
            too_big = outcomes.pop(MIXED_EPISODES // 2)
            assert isinstance(too_big, BaseException), "the write that cannot fit was acknowledged"
        failures: Counter[object] = Counter()
        n_acked = 0
        for i, outcome in enumerate(outcomes):
            if isinstance(outcome, tuple):
                acked.append(outcome)
                steps[i] += 1
                n_acked += 1
            else:
                failures[fault_status(outcome) if isinstance(outcome, DatabaseFault) else repr(outcome)[:60]] += 1
        if with_huge:
            failures[fault_status(too_big) if isinstance(too_big, DatabaseFault) else repr(too_big)[:60]] += 1
        waves.append((n_acked, failures))

    filler = small_disk / "filler"
    try:
        await upgrade_to_head(db)
        await db.write(create)
        fill_disk(small_disk, leave=768 * 1024)
        for _ in range(16):
            await batch(with_huge=True)
        during = len(acked)
        filler.unlink()  # space returns
        await batch(with_huge=False)
        stored = await db.read(
            lambda c: Counter(
                (e, k, r)
                for e, k, r in c.execute(
                    select(transitions.c.episode_id, transitions.c.step_index, transitions.c.request_id)
                )
            )
        )
    finally:
        filler.unlink(missing_ok=True)
        await db.dispose()

    by_request = Counter(r for (_, _, r) in stored.elements())
    expected = {(f"ep-{i}", k, f"r{i}-{k}") for i, k in acked}
    mixed = [w for w in waves if w[0] > 0 and w[1][507] > 0]
    print(
        f"\nmixed batches on a full disk [{journal_mode}]: {len(acked)} acknowledged ({during} while full), "
        f"{sum(stored.values())} stored, {len(mixed)} batches with both commits and SQLITE_FULL; per batch "
        f"{[(n, dict(f)) for n, f in waves]}"
    )
    assert mixed, f"no batch had both acknowledged jobs and a SQLITE_FULL failure: {waves}"
    assert any(n == 0 for n, _ in waves[:-1]), f"the small writes never used up the disk: {waves}"
    assert all(n == 1 for n in by_request.values()), "a job is stored twice"
    assert set(stored) == expected, (
        f"acknowledged but not stored: {sorted(expected - set(stored))[:5]}; "
        f"stored but reported failed: {sorted(set(stored) - expected)[:5]}"
    )
    assert {s for _, f in waves for s in f} <= {507}, f"a full disk must fail writes as disk-full (507): {waves}"
    assert waves[-1] == (MIXED_EPISODES, Counter()), f"the writes did not all succeed once space returned: {waves[-1]}"
