"""Request and response bodies of the HTTP API; OpenAPI is generated from them.

``ObservationResponse`` (every reset and step) and ``GraderResponse`` (every finished episode) are
msgspec structs: Litestar encodes them natively, without a pydantic validation and dump on the
hot path. The rest are pydantic models.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from pydantic import BaseModel, ConfigDict, Field

from service import env as core
from service.api.decoding import OPENENV_TOLERATED_STEP_FIELDS, ClosedBody
from service.api.episodes import ACTION_TYPE, EpisodeResult, ResetParams
from service.api.problems import InvalidInput

__all__ = ["ResetParams"]


# Action fields a body may carry at its top level instead of inside `action` (with `action_type`, a
# declared field): seed A's client posts {"action_type": "approve_refund", "reply": ...}.
TOP_LEVEL_ACTION_FIELDS = frozenset(core.ACTION_FIELDS)


class StepRequest(ClosedBody):
    """Body of ``POST /step``: the action fields (GET /schema → action) in ``action``, or at the top
    level of the body (seed A's ``{"action_type": "reject"}``), not both. Any other unknown top-level
    field is refused by name, except those OpenEnv clients send (``OPENENV_TOLERATED_STEP_FIELDS``)."""

    # The action's own fields are accepted at the top level (read from `model_extra` by the_action;
    # parse_action validates them as it does `action`); every other unknown field stays a 422 naming it.
    tolerated_fields = OPENENV_TOLERATED_STEP_FIELDS | TOP_LEVEL_ACTION_FIELDS
    tolerated_schemas = {
        name: {**spec, "description": f"The action's `{name}` at the top level, instead of inside `action` (not both). "
               + spec.get("description", "")}
        for name, spec in core.Action.model_json_schema()["properties"].items() if name in TOP_LEVEL_ACTION_FIELDS
    }

    action: dict[str, Any] | None = Field(
        default=None, description="The action, e.g. {\"decision\": \"request_info\"}; or put its fields at the top level."
    )
    action_type: str | None = Field(
        default=None, max_length=64, description="Seed A's top-level form: the decision, e.g. \"approve_refund\"."
    )
    episode_id: str | None = Field(
        default=None, max_length=255,
        description="From POST /reset. Without it: the episode of the ecomm_episode cookie POST /reset sets "
        "(or, on a SINGLE_SESSION server, of the latest reset).",
    )
    request_id: str | None = Field(
        default=None, min_length=1, max_length=255, description="Idempotency key: a retry returns the stored result."
    )
    timeout_s: float | None = Field(default=None, gt=0, description="Accepted for OpenEnv compatibility; steps are fast.")
    run_token: str | None = Field(
        default=None, max_length=128, description="For episodes of a run (or send `Authorization: Bearer <run_token>`)."
    )
    episode_token: str | None = Field(
        default=None, max_length=128,
        description="For a client-chosen episode_id: the episode_token its reset returned (or send `X-Episode-Token`).",
    )

    def the_action(self) -> Any:
        """The action payload, wherever the body put it (parsed by ``parse_action``)."""
        top = {k: v for k, v in (self.model_extra or {}).items() if k in TOP_LEVEL_ACTION_FIELDS}
        if "action_type" in self.model_fields_set:
            top[ACTION_TYPE] = self.action_type
        if self.action is not None and top:
            raise InvalidInput(
                "give the action either inside `action` or as top-level fields, not both "
                f"(top level: {', '.join(sorted(top))})",
                errors=[{"field": "action", "message": "given twice", "type": "conflict"}],
            )
        if self.action is None and not top:
            raise InvalidInput(
                "send the action: {\"action\": {\"decision\": \"request_info\"}} or its fields at the top level "
                "({\"action_type\": \"reject\"}); GET /schema shows every field",
                errors=[{"field": "action", "message": "field required", "type": "missing"}],
            )
        return self.action if self.action is not None else top


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
    """``GET /state``: id, step count, status and the leak-free ticket state. An episode whose details
    are private (a test episode; a run's episode while the run is in progress) shows only
    ``episode_id``, ``step_count``, ``episode_status``, ``done``, ``task_id`` and ``run_id``."""

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
