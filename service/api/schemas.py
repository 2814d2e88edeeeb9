"""Request and response bodies of the HTTP API; OpenAPI is generated from them.

``ObservationResponse`` (every reset and step) and ``GraderResponse`` (every finished episode) are
msgspec structs: Litestar encodes them natively, without a pydantic validation and dump on the
hot path. The rest are pydantic models.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from pydantic import BaseModel, ConfigDict, Field

from service.api.decoding import OPENENV_TOLERATED_STEP_FIELDS, ClosedBody
from service.api.episodes import EpisodeResult, ResetParams

__all__ = ["ResetParams"]


class StepRequest(ClosedBody):
    """Body of ``POST /step``. ``action`` holds the action fields (GET /schema → action). Unknown
    top-level fields are refused by name, except those OpenEnv clients send (``tolerated_fields``)."""

    # To accept the action's own fields at the top level too ({"decision": ...} without "action"), add
    # them here — `OPENENV_TOLERATED_STEP_FIELDS | frozenset(core.ACTION_FIELDS)` — and read them from
    # `model_extra`; every other unknown field stays a 422 naming it.
    tolerated_fields = OPENENV_TOLERATED_STEP_FIELDS

    action: dict[str, Any] = Field(description="The action, e.g. {\"decision\": \"request_info\"}.")
    episode_id: str | None = Field(default=None, max_length=255, description="From POST /reset.")
    request_id: str | None = Field(
        default=None, min_length=1, max_length=255, description="Idempotency key: a retry returns the stored result."
    )
    timeout_s: float | None = Field(default=None, gt=0, description="Accepted for OpenEnv compatibility; steps are fast.")
    run_token: str | None = Field(
        default=None, max_length=128, description="For episodes of a run (or send `Authorization: Bearer <run_token>`)."
    )


class ObservationResponse(msgspec.Struct):
    """OpenEnv result shape: the observation with ``reward``/``done`` lifted to the top level."""

    observation: dict[str, Any]
    reward: float | None
    done: bool
    metadata: dict[str, Any]

    @classmethod
    def of(cls, result: EpisodeResult) -> ObservationResponse:
        return cls(result.observation, result.reward, result.done, result.metadata)


class StateResponse(BaseModel):
    """``GET /state``: id, step count, status and the leak-free ticket state."""

    model_config = ConfigDict(extra="allow")

    episode_id: str | None
    step_count: int = Field(ge=0)
    episode_status: str | None = Field(default=None, description="active | done (no_episode without an id)")


class HealthResponse(BaseModel):
    status: str


class MetadataResponse(BaseModel):
    name: str
    description: str
    version: str
    readme_content: str | None = None
    dataset_version: str
    grader_version: str
    tasks: list[str]


class SchemaResponse(BaseModel):
    action: dict[str, Any]
    observation: dict[str, Any]
    state: dict[str, Any]


class TasksResponse(BaseModel):
    tasks: list[dict[str, Any]]
    action_schema: dict[str, Any]


class GraderResponse(msgspec.Struct, omit_defaults=True):
    """``GET /grader?episode_id=…``: the stored grade of a finished episode (once per episode: a struct)."""

    episode_id: str
    task_id: str
    score: Annotated[float, msgspec.Meta(ge=0.0, le=1.0)]
    resolved: bool
    grader_version: str
    components: list[dict[str, Any]]
    clauses: list[str]
    raw: float | None
    finished: bool
    step_count: int
    graded_at: str


class RunGradeResponse(BaseModel):
    """``GET /grader?run_id=…``: the run's summary (on the test split: released aggregates only)."""

    run_id: str
    status: str
    episodes_done: int
    episodes_total: int
    per_episode_results: bool
    summary: dict[str, Any] | None
    ladder: dict[str, Any] | None = None


class BaselineTaskScore(BaseModel):
    mean: float
    episodes: int


class BaselineResponse(BaseModel):
    model_config = ConfigDict(extra="allow")

    agent: str
    split: str
    seeds_per_task: int
    tasks: dict[str, BaselineTaskScore]
    overall: float
