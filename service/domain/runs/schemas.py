"""Request and response bodies of runs and the leaderboard; OpenAPI is generated from them."""

from __future__ import annotations

from typing import Annotated, Any, NotRequired, TypedDict

from pydantic import BaseModel, ConfigDict, Field, field_validator

from service import env as core
from service.db import names, run_store
from service.domain.episodes.task_names import canonical_task_id
from service.lib.decoding import JsonInt, JsonNumber

# Bounds of the integers a run body may hold: every integer a client sends is a JSON integer within
# what the columns and the JSON types can store (PostgreSQL's int4 ends at 2**31 - 1).
MAX_LIMIT_PER_TASK = 10_000  # more than any task's pool (the manifest stops at the pool's end)
MAX_USAGE_TOKENS = 10**15
MAX_USAGE_COST_USD = 1e9

AGENT_KEY_MAX = 128  # agent_names.name_key: NFKC may lengthen a name ("㍿" is four characters)


class CreateRun(BaseModel):
    """Body of ``POST /runs``."""

    model_config = ConfigDict(extra="forbid")

    agent: str = Field(
        min_length=1,
        max_length=128,
        description="Agent name shown on the leaderboard. A name first run with a submitter key is that submitter's: "
        "others (and anonymous runs) get 409.",
    )
    model: str = Field(default="", max_length=200, description="Model name (empty for scripted agents).")
    split: core.Split = Field(default="dev", description="test needs a submitter key (Authorization: Bearer).")
    trials: Annotated[int, JsonInt] = Field(
        default=1, ge=1, le=core.MAX_TRIALS, description="k: episodes per ticket (pass^k)."
    )
    task_ids: list[str] | None = Field(
        default=None,
        min_length=1,
        max_length=len(core.TASKS),
        description="A subset of tasks (not ranked; not on test).",
    )
    limit_per_task: Annotated[int | None, JsonInt] = Field(
        default=None,
        ge=1,
        le=MAX_LIMIT_PER_TASK,
        description="Play only the first N tickets of each task (not ranked; not on test).",
    )

    @field_validator("agent", "model")
    @classmethod
    def _printable(cls, value: str) -> str:
        # Characters that show as nothing or as blank space — format (zero-width spaces, bidi overrides, soft
        # hyphens), control, default-ignorable (variation selectors, the combining grapheme joiner), blank
        # letters (Hangul fillers) — would let a name look like another one on the board.
        hidden = names.invisible_characters(value)
        if hidden:
            raise ValueError(
                f"holds invisible characters ({', '.join(hidden[:8])}); use visible text only — names that look alike "
                "are one name"
            )
        return value

    @field_validator("agent")
    @classmethod
    def _key_fits(cls, agent: str) -> str:
        if len(run_store.agent_name_key(agent)) > AGENT_KEY_MAX:
            raise ValueError(f"is longer than {AGENT_KEY_MAX} characters once normalised (NFKC)")
        return agent

    @field_validator("task_ids")
    @classmethod
    def _aliases(cls, task_ids: list[str] | None) -> list[str] | None:
        return None if task_ids is None else [canonical_task_id(t) for t in task_ids]  # easy|medium|hard too


class Usage(BaseModel):
    """Self-reported token usage (shown as such; never verified)."""

    model_config = ConfigDict(extra="forbid")

    prompt_tokens: Annotated[int, JsonInt] = Field(ge=0, le=MAX_USAGE_TOKENS)
    completion_tokens: Annotated[int, JsonInt] = Field(ge=0, le=MAX_USAGE_TOKENS)
    cost_usd: Annotated[float | None, JsonNumber] = Field(default=None, ge=0, le=MAX_USAGE_COST_USD)


MANIFEST_PAGE_MAX = 1000
UNRANKED_SHOWN = 20  # unranked (subset) runs on a leaderboard: the most recent ones; the board says how many in all
# Episodes per run page: at most 200 (1,000 cost 86 ms JSON / 107 ms HTML to build). A larger per_page, up to
# RUN_PAGE_ASKED_MAX (what clients written before asked for), is served as 200: the page object says so.
RUN_PAGE_DEFAULT = RUN_PAGE_MAX = 200
RUN_PAGE_ASKED_MAX = 1000


class RunGradeResponse(BaseModel):
    """``GET /grader?run_id=…``: the run's summary (on the test split: released aggregates only)."""

    run_id: str
    status: str
    episodes_done: int | None  # an active test run's progress is its holder's only (GET /runs/{id} with its token)
    episodes_total: int
    per_episode_results: bool
    summary: dict[str, Any] | None
    ladder: dict[str, Any] | None = None


# Response bodies. TypedDicts: the service builds plain dicts (cached and shared where it can, e.g. the
# leaderboard) and Litestar encodes them without a model in between; OpenAPI describes them from these.
# Optional keys are a ``total=False`` subclass of the required ones: with postponed annotations (this
# module's ``from __future__``) TypedDict does not see ``NotRequired[...]``.


class GroupStats(TypedDict):
    resolved: float
    mean: float
    n: int


class RunSummary(TypedDict, total=False):
    """A complete run's statistics (on the test split: the released value, its interval, the run's size)."""

    resolved: float
    resolved_ci95: list[float]
    mean: float
    ci95: list[float]
    pass_hat_k: dict[str, float]
    items: int
    episodes: int
    errors: int
    per_task: dict[str, GroupStats]
    per_family: dict[str, GroupStats]
    per_difficulty: dict[str, GroupStats]
    noise_scale: float  # test releases: the standard deviation of the Gaussian draw added before the Ladder


class VerificationView(TypedDict):
    """An operator's check of a run (``python -m service.verify``)."""

    by: str
    at: str
    note: str | None


class UsageView(TypedDict, total=False):
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float | None
    self_reported: bool


class RunView(TypedDict):
    """A run as every run endpoint shows it."""

    run_id: str
    status: str  # active | complete | expired
    status_reason: str | None  # expired: idle | test_key_changed | submitter_revoked
    agent: str
    model: str
    split: str
    board: str  # benchmark (test) | practice (train, dev)
    trials: int
    task_ids: list[str]
    ranked: bool
    episodes_total: int
    episodes_started: int | None  # an active test run's progress: its token's holder only
    episodes_done: int | None
    dataset_version: str
    grader_version: str
    submitter: str | None
    test_key_fingerprint: str | None
    usage: UsageView | None
    checked: str  # verified | self-reported
    verified: VerificationView | None
    created_at: str
    finished_at: str | None
    run_url: str
    leaderboard_url: str


class RunCreated(RunView):
    """``POST /runs``: the run, its token (shown once) and where its manifest is."""

    run_token: str
    limit_per_task: int | None
    manifest_url: str


class ManifestEntryView(TypedDict):
    index: int
    task_id: str
    seed: int
    trial: int


class _RunEpisodeRowRequired(ManifestEntryView):
    episode_id: str | None
    status: str  # pending | active | done
    step_count: int


class RunEpisodeRow(_RunEpisodeRowRequired, total=False):
    score: float | None  # only once a run's per-episode results are shown
    resolved: bool | None


class PageInfo(TypedDict):
    number: int
    per_page: int
    pages: int
    first_index: int
    prev_url: str | None
    next_url: str | None


class LadderInfo(TypedDict):
    released: float | None
    submitter_best: float | None
    margin: float
    noise_scale: float  # the sd of the run's Gaussian draw
    test_run_budget: int  # test runs a submitter key may ever complete under one test key
    note: str


class _RunPageRequired(RunView):
    episodes: list[RunEpisodeRow]
    episodes_listed: bool  # False: a test run's episodes, listed to its token's holder only while it is active
    summary: RunSummary | None
    per_episode_results: bool
    page: PageInfo


class RunPage(_RunPageRequired, total=False):
    """``GET /runs/{id}``: the run and one page of its episodes."""

    ladder: LadderInfo  # test runs


class ManifestPage(TypedDict):
    run_id: str
    episodes_total: int
    offset: int
    limit: int
    entries: list[ManifestEntryView]
    next_url: str | None


class Comparison(TypedDict):
    """A ranked row against the next one down."""

    method: str  # paired (practice boards) | released values (test) | intervals (runs kept before 0009)
    difference: float
    z: float | None
    separated: bool  # ahead at 95%: the next row starts a new tie group (a new rank)


class _LeaderboardRowRequired(TypedDict):
    rank: int | None  # None: an unranked (subset) run
    run_id: str
    agent: str
    model: str
    submitter: str | None
    checked: str  # verified | self-reported (agent and model names as the submitter declared them)
    verified: VerificationView | None
    trials: int
    resolved: float | None
    resolved_ci95: list[float] | None
    mean: float | None
    ci95: list[float] | None
    pass_hat_k: dict[str, float] | None
    per_family: dict[str, GroupStats] | None
    per_difficulty: dict[str, GroupStats] | None
    per_task: dict[str, GroupStats] | None
    episodes: int | None
    errors: int | None
    dataset_version: str
    grader_version: str
    test_key_fingerprint: str | None
    finished_at: str | None
    usage: UsageView | None
    run_url: str


class LeaderboardRow(_LeaderboardRowRequired, total=False):
    entrant_runs: int  # ranked rows: how many runs the entrant has
    vs_next: Comparison | None  # ranked rows: the comparison with the next row (None: the last)


class BoardPage(TypedDict):
    number: int
    per_page: int
    pages: int
    rows_total: int  # ranked rows on the whole board
    prev_url: str | None
    next_url: str | None


class Leaderboard(TypedDict):
    split: str
    board: str  # benchmark (test) | practice (train, dev: public labels)
    note: str
    verified_only: bool
    dataset_version: str
    grader_version: str
    test_key_fingerprint: str | None
    method: str
    rows: list[LeaderboardRow]  # one page of them (``page``); ranks are the whole board's
    unranked: list[LeaderboardRow]
    unranked_total: int
    unranked_shown: int
    page: NotRequired[BoardPage]


BOARD_PAGE_DEFAULT = 50  # ranked rows per leaderboard page
BOARD_PAGE_MAX = 200


class TrajectoryLine(TypedDict):
    """One line of ``GET /runs/{id}/trajectories.jsonl``: a finished episode of a complete public run."""

    episode_id: str
    run_id: str
    task_id: str
    seed: int
    trial: int
    split: str
    observations: list[dict[str, Any]]  # the reset's, then one per step
    actions: list[dict[str, Any]]
    rewards: list[float | None]
    score: float | None
    resolved: bool | None
    grader_version: str
