"""Every runtime knob, read from environment variables once, with defaults that work offline.

Nothing here is global: ``Settings.from_env()`` is called by the composition root
(``service.app``) and the resulting frozen value is handed to ``create_app(settings)``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields

from service.db.engine import DEFAULT_CONNECT_TIMEOUT_S, DEFAULT_POOL_TIMEOUT_S, Database
from service.env.about import ENV_VERSION
from service.env.world import DEFAULT_SPLIT

DEFAULT_DATABASE_URL = "sqlite+aiosqlite:///./data/ecomm_support.db"

DEFAULT_FRAME_ANCESTORS = "https://huggingface.co https://*.hf.space"
NO_FRAMING = "'none'"

# One CSP source expression: 'none' / 'self', or [scheme://][*.]host[:port] (what frame-ancestors takes).
_SOURCE = re.compile(r"^(?:'none'|'self'|(?:https?://)?(?:\*\.)?[a-z0-9-]+(?:\.[a-z0-9-]+)*(?::\d{1,5})?)$", re.I)


def check_frame_ancestors(value: str) -> str:
    """``value`` as a frame-ancestors source list (space-separated), or ValueError naming the setting."""
    sources = value.split()
    if not sources or any(not _SOURCE.match(s) for s in sources) or (NO_FRAMING in sources and len(sources) > 1):
        raise ValueError(
            f"FRAME_ANCESTORS must be 'none' or origins separated by spaces (e.g. {DEFAULT_FRAME_ANCESTORS}), "
            f"got {value!r}"
        )
    return " ".join(sources)


def _int(env: Mapping[str, str], name: str, default: int, minimum: int = 0) -> int:
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw)
    except ValueError as exc:
        raise ValueError(f"{name} must be an integer, got {raw!r}") from exc
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return value


def _float(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = float(raw)
    except ValueError as exc:
        raise ValueError(f"{name} must be a number, got {raw!r}") from exc
    if not value > 0:
        raise ValueError(f"{name} must be > 0, got {value}")
    return value


def _seconds_or_off(env: Mapping[str, str], name: str, default: float | None) -> float | None:
    """A positive number of seconds, or 0 / "off" for never."""
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return default
    if raw.strip().lower() in {"0", "off", "never"}:
        return None
    return _float(env, name, 1.0)


def _bool(env: Mapping[str, str], name: str, default: bool) -> bool:
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return default
    return raw.strip().lower() in {"1", "true", "yes", "on"}


def _baseline_agent(env: Mapping[str, str]) -> str:
    """``BASELINE_AGENT``: one of the shipped reference agents (the oracles are test fixtures, never served)."""
    from service.env.agents import AGENT_NAMES

    name = env.get("BASELINE_AGENT") or "heuristic"
    if name not in AGENT_NAMES:
        raise ValueError(f"BASELINE_AGENT must be one of {', '.join(AGENT_NAMES)}, got {name!r}")
    return name


def _without_password(url: str) -> str:
    """``url`` with its password replaced by ``***`` (for reprs and logs)."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        return make_url(url).render_as_string(hide_password=True)
    except (ArgumentError, ValueError):
        return "<unparsable database URL>"


@dataclass(frozen=True, repr=False)
class Settings:
    """Service configuration. Build it with :meth:`from_env` or directly in tests. Its repr (logs,
    tracebacks) leaves out the secrets and the database password."""

    database_url: str = DEFAULT_DATABASE_URL
    # PostgreSQL only: put every table (and alembic_version) in this schema via search_path.
    database_schema: str | None = None
    host: str = "0.0.0.0"
    port: int = 7860
    workers: int = 1  # uvicorn worker processes of `python -m service.app` (all state is in the database)
    # WORKERS > 1: a serving worker whose event loop has not run for this long is killed and replaced by the
    # supervisor (service/workers.py); a starting one only after this + db_start_timeout_s
    worker_timeout_s: float = 60.0
    # WebSocket sessions per worker. A session costs ~35 kB and a socket; what bounds a worker is the CPU of
    # their frames (docs/performance.md#sessions-at-scale-on-one-worker): 1,024 agents thinking 1-5 s send
    # ~340 frames/s, a third of a core.
    max_concurrent_envs: int = 1024
    ws_idle_timeout_s: float = 300.0
    max_body_bytes: int = 64 * 1024  # HTTP bodies, WebSocket frames (uvicorn's ws_max_size too)
    # Abuse limits (docs/security.md, service.lib.limits.RequestBudgets). Requests (HTTP requests, WS
    # handshakes and frames) per second: per credential a request carries — an episode, its token, a
    # WS session (rate_limit_per_s), a bearer run token or key (rate_limit_run_token_per_s) — or per
    # client address for requests with none (rate_limit_per_s); under a ceiling for all of one address.
    # Token buckets of rate_limit_burst (the ceiling's: twice that): a trainer's 64 environments may
    # all act at once. 0 turns a limit off.
    rate_limit_per_s: int = 20
    rate_limit_run_token_per_s: int = 50
    rate_limit_address_per_s: int = 100
    rate_limit_burst: int = 128
    # Addresses no rate limit or per-client cap applies to, as the TCP peer of a request with no forwarded
    # header (never through X-Forwarded-For). Loopback by default: the benchmarks and load tests run
    # dozens of agents from one host.
    rate_limit_exempt: str = "127.0.0.1,::1"
    # Reverse proxies in front of the app that append the address they saw to X-Forwarded-For: the client
    # is the entry this many from the right (0: the TCP peer; X-Forwarded-For is ignored). 1 for one
    # proxy (a Hugging Face Space, nginx). The app must be reachable only through them.
    trusted_proxy_hops: int = 0
    # GET /runs/{id}[/manifest] and /leaderboard per address per minute, beside the limit above: 2 a second on
    # average, and a client walking every page of a big run (16 for 3,200 entries) never meets it.
    rate_limit_heavy_reads_per_min: int = 120
    rate_limit_trajectories_per_min: int = 6  # GET /runs/{id}/trajectories.jsonl per address per minute
    rate_limit_runs_per_min: int = 6  # POST /runs per address per minute
    # of max_concurrent_envs: one client cannot take every slot, and a trainer's 64 environments fit
    ws_max_sessions_per_client: int = 64
    # Connections (service.lib.connections): a request must arrive whole within this many seconds of the
    # connection opening or of the previous response (else 408 and closed; 0: no deadline); one address
    # holds at most so many open connections, HTTP and WebSocket (0: no cap; off behind trusted proxies).
    connection_request_timeout_s: float = 10.0
    max_connections_per_client: int = 64
    # The last slots of max_concurrent_envs go only to clients that hold no session yet: a few
    # addresses at their per-client cap cannot lock everyone else out.
    ws_reserved_sessions: int = 32
    # HTTP MCP sessions (openenv/session/create), kept in the database so every worker serves them;
    # one unused this long is gone (swept by the retention pass); a client address holds at most so many.
    mcp_session_idle_s: float = 3600.0
    mcp_max_sessions_per_client: int = 64
    # Storage per client address (plain episodes; runs are bounded by RATE_LIMIT_RUNS_PER_MIN): at most
    # so many unfinished at once, and so many started in 24 hours (0: no cap).
    max_active_episodes_per_client: int = 64
    max_episodes_per_client_per_day: int = 5000
    default_split: str = DEFAULT_SPLIT
    # Who may show the pages in a frame (CSP frame-ancestors): Hugging Face shows a Space inside an
    # iframe on huggingface.co. "'none'": nobody (and X-Frame-Options: DENY).
    frame_ancestors: str = DEFAULT_FRAME_ANCESTORS
    log_level: str = "INFO"
    access_log: bool = False  # one line per HTTP request; the database already records every step
    ws_per_message_deflate: bool = False  # compressing ~2 kB frames costs more CPU than it saves on a LAN
    migrate_on_start: bool = True
    baseline_agent: str = "heuristic"
    baseline_split: str = "dev"
    baseline_seeds_per_task: int = 5
    app_version: str = ENV_VERSION  # the package's (service.env.about)
    run_ttl_s: float = 24 * 3600.0  # a run with no activity for this long expires (never ranked)
    run_sweep_interval_s: float = 60.0  # how often a background task expires idle runs (reads never write)
    # Retention (a background task of every worker, every retention_interval_s): deleted after this
    # long without a step — plain episodes never finished; plain episodes finished (None: kept);
    # expired runs with all their episodes; complete unranked runs; ranked runs beyond the ones below.
    retain_unfinished_episodes_s: float = 24 * 3600.0
    retain_finished_episodes_s: float | None = 30 * 24 * 3600.0
    retain_expired_runs_s: float = 7 * 24 * 3600.0
    # Complete ranked runs on the public splits an entrant (submitter, agent name, model, split) keeps: its
    # best (its leaderboard row) and its most recent others, this many in all; the rest are deleted
    # retain_finished_episodes_s after they finished. 0: every ranked run is kept. Test runs are always kept.
    retain_ranked_runs_per_entrant: int = 3
    retention_interval_s: float = 600.0
    # The test split is generated from this secret (any string; 32+ random characters). When unset, a
    # random one is created at first start and kept in the database. Never publish it.
    test_split_key: str | None = field(default=None, repr=False)
    submitter_keys: str | None = field(default=None, repr=False)  # "name:key,name:key": keys to preload for automation
    test_run_quota: int = 3  # test runs per submitter key (unless the key has its own quota) ...
    test_run_quota_period_s: float = 24 * 3600.0  # ... per period
    # Test runs a submitter key may ever complete under one test key (issue #21.2): the release noise is
    # sized from it so that all of them together tell nothing about any one ticket (service.stats). Raise it
    # only with a new TEST_SPLIT_KEY: runs already released under a smaller budget got less noise.
    test_run_budget: int = 3
    sqlite_journal_mode: str = "WAL"  # DELETE on network file systems (WAL needs shared memory)
    sqlite_synchronous: str = "FULL"  # a commit is on disk (fsync) before any step in it is acknowledged
    # Bounded database waits; past them a request answers 503 with Retry-After instead of hanging.
    db_connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S  # PostgreSQL connect; SQLite first open at start
    db_pool_timeout_s: float = DEFAULT_POOL_TIMEOUT_S  # a pooled connection (PostgreSQL) / a SQLite thread's queue
    # each statement (asyncpg command_timeout) / a lock wait (SQLite busy_timeout); None: 5 s / 10 s
    db_statement_timeout_s: float | None = None
    # At start: how long to keep retrying migrations and reading the test key while the database is unavailable.
    db_start_timeout_s: float = 30.0
    # For HTTP clients that never send an episode_id and keep no cookie (seed A's `requests.post`
    # client, written for a one-session server): such a request means the episode of the latest
    # /reset that named none either. Any client could land in it, so an operator switches it on for
    # a server that serves one client at a time. Kept in the process: needs WORKERS=1.
    single_session: bool = False
    # Tasks a reset that names no task_id or difficulty picks from (ids or the aliases
    # easy|medium|hard); empty: every task.
    default_tasks: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.single_session and self.workers > 1:
            raise ValueError(
                "SINGLE_SESSION=1 needs WORKERS=1: the session's episode is kept in the one server process"
            )

    def __repr__(self) -> str:
        shown = []
        for f in fields(self):
            if not f.repr:
                continue
            value = getattr(self, f.name)
            if f.name == "database_url":
                value = _without_password(value)
            shown.append(f"{f.name}={value!r}")
        return f"{type(self).__name__}({', '.join(shown)})"

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if environ is None else environ
        if env.get("FORWARDED_ALLOW_IPS"):
            # uvicorn reads it too: with "*" it takes the LEFTMOST X-Forwarded-For entry, which the client
            # writes, as the client's address. Refuse to start rather than serve with forgeable limits.
            raise ValueError(
                "FORWARDED_ALLOW_IPS is set: unset it (uvicorn would take the client address from the leftmost "
                "X-Forwarded-For entry, which clients can forge) and set TRUSTED_PROXY_HOPS to the number of "
                "proxies in front of the app instead (1 on a Hugging Face Space; docs/security.md)"
            )
        return cls(
            database_url=env.get("DATABASE_URL") or DEFAULT_DATABASE_URL,
            database_schema=env.get("DATABASE_SCHEMA") or None,
            host=env.get("HOST") or "0.0.0.0",
            port=_int(env, "PORT", 7860, minimum=1),
            workers=_int(env, "WORKERS", 1, minimum=1),
            worker_timeout_s=_float(env, "WORKER_TIMEOUT_S", 60.0),
            max_concurrent_envs=_int(env, "MAX_CONCURRENT_ENVS", 1024, minimum=1),
            ws_idle_timeout_s=_float(env, "WS_IDLE_TIMEOUT_S", 300.0),
            max_body_bytes=_int(env, "MAX_BODY_BYTES", 64 * 1024, minimum=1024),
            rate_limit_per_s=_int(env, "RATE_LIMIT_PER_S", 20, minimum=0),
            rate_limit_run_token_per_s=_int(env, "RATE_LIMIT_RUN_TOKEN_PER_S", 50, minimum=0),
            rate_limit_address_per_s=_int(env, "RATE_LIMIT_ADDRESS_PER_S", 100, minimum=0),
            rate_limit_burst=_int(env, "RATE_LIMIT_BURST", 128, minimum=1),
            rate_limit_exempt=env.get("RATE_LIMIT_EXEMPT", "127.0.0.1,::1"),
            trusted_proxy_hops=_int(env, "TRUSTED_PROXY_HOPS", 0, minimum=0),
            rate_limit_heavy_reads_per_min=_int(env, "RATE_LIMIT_HEAVY_READS_PER_MIN", 120, minimum=0),
            rate_limit_trajectories_per_min=_int(env, "RATE_LIMIT_TRAJECTORIES_PER_MIN", 6, minimum=0),
            rate_limit_runs_per_min=_int(env, "RATE_LIMIT_RUNS_PER_MIN", 6, minimum=0),
            ws_max_sessions_per_client=_int(env, "WS_MAX_SESSIONS_PER_CLIENT", 64, minimum=0),
            connection_request_timeout_s=_seconds_or_off(env, "CONNECTION_REQUEST_TIMEOUT_S", 10.0) or 0.0,
            max_connections_per_client=_int(env, "MAX_CONNECTIONS_PER_CLIENT", 64, minimum=0),
            ws_reserved_sessions=_int(env, "WS_RESERVED_SESSIONS", 32, minimum=0),
            mcp_session_idle_s=_float(env, "MCP_SESSION_IDLE_S", 3600.0),
            mcp_max_sessions_per_client=_int(env, "MCP_MAX_SESSIONS_PER_CLIENT", 64, minimum=1),
            max_active_episodes_per_client=_int(env, "MAX_ACTIVE_EPISODES_PER_CLIENT", 64, minimum=0),
            max_episodes_per_client_per_day=_int(env, "MAX_EPISODES_PER_CLIENT_PER_DAY", 5000, minimum=0),
            default_split=env.get("DEFAULT_SPLIT") or DEFAULT_SPLIT,
            frame_ancestors=check_frame_ancestors(env.get("FRAME_ANCESTORS") or DEFAULT_FRAME_ANCESTORS),
            log_level=(env.get("LOG_LEVEL") or "INFO").upper(),
            access_log=_bool(env, "ACCESS_LOG", False),
            ws_per_message_deflate=_bool(env, "WS_PER_MESSAGE_DEFLATE", False),
            migrate_on_start=_bool(env, "MIGRATE_ON_START", True),
            baseline_agent=_baseline_agent(env),
            baseline_split=env.get("BASELINE_SPLIT") or "dev",
            baseline_seeds_per_task=_int(env, "BASELINE_SEEDS_PER_TASK", 5, minimum=1),
            run_ttl_s=_float(env, "RUN_TTL_S", 24 * 3600.0),
            run_sweep_interval_s=_float(env, "RUN_SWEEP_INTERVAL_S", 60.0),
            retain_unfinished_episodes_s=_float(env, "RETAIN_UNFINISHED_EPISODES_S", 24 * 3600.0),
            retain_finished_episodes_s=_seconds_or_off(env, "RETAIN_FINISHED_EPISODES_S", 30 * 24 * 3600.0),
            retain_expired_runs_s=_float(env, "RETAIN_EXPIRED_RUNS_S", 7 * 24 * 3600.0),
            retain_ranked_runs_per_entrant=_int(env, "RETAIN_RANKED_RUNS_PER_ENTRANT", 3, minimum=0),
            retention_interval_s=_float(env, "RETENTION_INTERVAL_S", 600.0),
            test_split_key=env.get("TEST_SPLIT_KEY") or None,
            submitter_keys=env.get("SUBMITTER_KEYS") or None,
            test_run_quota=_int(env, "TEST_RUN_QUOTA", 3, minimum=0),
            test_run_quota_period_s=_float(env, "TEST_RUN_QUOTA_PERIOD_S", 24 * 3600.0),
            test_run_budget=_int(env, "TEST_RUN_BUDGET", 3, minimum=1),
            sqlite_journal_mode=(env.get("SQLITE_JOURNAL_MODE") or "WAL").upper(),
            sqlite_synchronous=(env.get("SQLITE_SYNCHRONOUS") or "FULL").upper(),
            db_connect_timeout_s=_float(env, "DB_CONNECT_TIMEOUT_S", DEFAULT_CONNECT_TIMEOUT_S),
            db_pool_timeout_s=_float(env, "DB_POOL_TIMEOUT_S", DEFAULT_POOL_TIMEOUT_S),
            db_statement_timeout_s=_float(env, "DB_STATEMENT_TIMEOUT_S", 0.0) or None,  # unset: the backend default
            single_session=_bool(env, "SINGLE_SESSION", False),
            default_tasks=tuple(t.strip() for t in (env.get("DEFAULT_TASKS") or "").split(",") if t.strip()),
            db_start_timeout_s=_float(env, "DB_START_TIMEOUT_S", 30.0),
        )

    def database(self) -> Database:
        """The database these settings describe (engine, pragmas, schema)."""
        return Database(
            self.database_url,
            schema=self.database_schema,
            sqlite_journal_mode=self.sqlite_journal_mode,
            sqlite_synchronous=self.sqlite_synchronous,
            connect_timeout_s=self.db_connect_timeout_s,
            pool_timeout_s=self.db_pool_timeout_s,
            statement_timeout_s=self.db_statement_timeout_s,
        )

    @property
    def exempt_addresses(self) -> frozenset[str]:
        return frozenset(a.strip() for a in self.rate_limit_exempt.split(",") if a.strip())

    @property
    def is_sqlite(self) -> bool:
        return self.database_url.startswith("sqlite")
