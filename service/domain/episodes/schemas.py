"""Request and response bodies of the OpenEnv surface (HTTP, WebSocket, MCP); OpenAPI and the
MCP tool schemas are generated from them.

``ObservationResponse`` (every reset and step) and ``GraderResponse`` (every finished episode) are
msgspec structs: Litestar encodes them natively, without a pydantic validation and dump on the hot
path. The episode viewer's body is a TypedDict (a plain dict, described to OpenAPI). The rest are
pydantic models.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, TypedDict

import msgspec
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from service import env as core
from service.errors import InvalidRequest
from service.lib.decoding import (
    OPENENV_TOLERATED_RESET_FIELDS,
    OPENENV_TOLERATED_STEP_FIELDS,
    ClosedBody,
    JsonBool,
    JsonInt,
    validation_errors,
)
from service.lib.problems import listed

MAX_SEED = core.MAX_SEED
# Limits of a reset's fields, for the POST body and GET /reset's query alike (OpenEnv: episode_id ≤ 255).
EPISODE_ID_MAX = 255
TASK_ID_MAX = 64
RUN_ID_MAX = 64
CHOICE_MAX = 16  # a split or a difficulty, as a query parameter
# Run episodes are "<run_id>-<index>" with run ids "run_<hex>": clients may not choose ids there.
RUN_ID_PREFIX = "run_"
MIN_CLIENT_TOKEN = 32  # a client's own episode token must be at least this long (as hard to guess as ours)

# Fields several bodies share (HTTP, WebSocket and the MCP tools): one definition each.
RunToken = Annotated[  # the default (None) goes on each field: the mypy plugin reads it there only
    str | None,
    Field(
        max_length=128,
        description="For episodes of a run: the token POST /runs returned (over HTTP also "
        "`Authorization: Bearer <run_token>`).",
    ),
]
RequestId = Annotated[
    str | None,
    Field(
        default=None, min_length=1, max_length=255, description="Idempotency key: a retry returns the stored result."
    ),
]
EpisodeToken = Annotated[
    str | None,
    Field(
        default=None,
        max_length=128,
        description="For a client-chosen episode_id: the episode_token its reset returned "
        "(over HTTP also `X-Episode-Token`; an MCP session sends its own).",
    ),
]


class ResetParams(ClosedBody):
    """Body of ``POST /reset`` (all optional; ``{}`` and an empty body are valid). Unknown fields are
    refused by name; so are a ``true`` or ``"5"`` seed (strict integers)."""

    tolerated_fields = OPENENV_TOLERATED_RESET_FIELDS

    seed: Annotated[int | None, JsonInt] = Field(
        default=None, ge=0, le=MAX_SEED, description="Ticket seed; random (and recorded) if omitted."
    )
    episode_id: str | None = Field(
        default=None,
        min_length=1,
        max_length=EPISODE_ID_MAX,
        description="Client-chosen episode id; generated if omitted.",
    )
    task_id: str | None = Field(default=None, max_length=TASK_ID_MAX, description="A task id from GET /tasks.")
    split: core.Split | None = Field(default=None, description="Ticket split.")
    difficulty: str | None = Field(default=None, max_length=CHOICE_MAX, description="Pick a task of this difficulty.")
    run_id: str | None = Field(
        default=None,
        max_length=RUN_ID_MAX,
        description="Start the next episode of this run (needs run_token); the run picks the ticket.",
    )
    run_token: RunToken = None
    episode_token: str | None = Field(
        default=None,
        max_length=128,
        description=(
            f"With a client-chosen episode_id: your own secret for it ({MIN_CLIENT_TOKEN}-128 characters; one is "
            "made and returned in metadata.episode_token if omitted). With resume: that episode's token."
        ),
    )
    resume: Annotated[bool, JsonBool] = Field(
        default=False,
        description="With episode_id of a stored episode: re-attach to it instead of starting a new one.",
    )


@dataclass(frozen=True)
class EpisodeResult:
    """One observation to send: after reset, resume or step."""

    episode_id: str
    observation: dict[str, Any]
    reward: float | None
    done: bool
    metadata: dict[str, Any]

    def wire(self) -> dict[str, Any]:
        return {"observation": self.observation, "reward": self.reward, "done": self.done, "metadata": self.metadata}


# Seed A's name for `decision`: the core's Action takes it; GET /schema's action declares it (wire_action_schema).
ACTION_TYPE = core.ACTION_TYPE
# OpenEnv's `Action` base model (openenv-core 0.3.0, openenv 0.10) has `metadata: Dict = {}`, and its
# clients send `action.model_dump()`: every typed action carries it. Accepted (an object), ignored.
ACTION_METADATA = "metadata"


def parse_action(payload: Any) -> core.Action:
    if not isinstance(payload, dict):
        raise InvalidRequest(
            '`action` must be a JSON object such as {"decision": "request_info"}; GET /schema shows every field',
            errors=[{"field": "action", "message": "must be an object", "type": "dict_type"}],
        )
    if ACTION_METADATA in payload:
        if not isinstance(payload[ACTION_METADATA], dict):
            raise InvalidRequest(
                "invalid action (action.metadata): must be an object (OpenEnv's Action.metadata; it is ignored) — "
                "GET /schema shows the action schema",
                errors=[{"field": "action.metadata", "message": "must be an object", "type": "dict_type"}],
            )
        payload = {k: v for k, v in payload.items() if k != ACTION_METADATA}
    try:
        return core.Action.model_validate(payload)
    except ValidationError as exc:
        errors = validation_errors(exc, "action")
        if ACTION_TYPE in payload:  # name the field the client sent
            errors = [_aliased(e) for e in errors]
        raise InvalidRequest(
            f"invalid action: {listed(errors)} — GET /schema shows the action schema", errors=errors
        ) from exc


def _aliased(error: dict[str, Any]) -> dict[str, Any]:
    """An error of an action sent with ``action_type``, naming that field as the client wrote it."""
    if error["type"] == core.ACTION_TYPE_CONFLICT and error["field"] == "action":
        return {**error, "field": f"action.{ACTION_TYPE}"}
    return {**error, "field": error["field"].replace("action.decision", f"action.{ACTION_TYPE}", 1)}


class WireObservation(core.Observation):
    """The observation as clients get it: the core's plus the episode it belongs to.

    The one definition of both the payload (:func:`wire_observation`) and GET /schema's
    ``observation``. On the wire ``reward`` and ``done`` sit at the envelope's top level (OpenEnv);
    validators such as openenv 0.10's ``runtime.observation_schema`` put them back before checking
    against the schema, so the schema keeps them.
    """

    episode_id: str = Field(description="The episode this observation belongs to (from POST /reset).")


WIRE_LIFTED = frozenset({"reward", "done"})  # sent beside the observation, not inside it
_NOT_IN_WIRE = set(WIRE_LIFTED)  # model_dump's `exclude` (never changed)


def wire_observation(episode_id: str, observation: core.Observation) -> dict[str, Any]:
    """The observation as :class:`WireObservation` dumps it (``reward`` and ``done`` lifted out): the core's
    own dump plus the id, which comes last there too — without building a second model per step."""
    wire = observation.model_dump(mode="json", exclude=_NOT_IN_WIRE)
    wire["episode_id"] = episode_id
    return wire


def wire_observation_schema() -> dict[str, Any]:
    """JSON schema of an observation with ``reward`` and ``done`` put back (GET /schema)."""
    return WireObservation.model_json_schema()


def wire_action_schema() -> dict[str, Any]:
    """JSON schema of the action :func:`parse_action` accepts: the core's, plus ``action_type`` and
    OpenEnv's ``metadata``."""
    schema = core.Action.model_json_schema()
    decision = schema["properties"]["decision"]
    schema["properties"][ACTION_TYPE] = {
        **decision,
        "title": "Action Type",
        "description": "Seed A's name for `decision`; give one of the two.",
    }
    schema["properties"][ACTION_METADATA] = {
        "type": "object",
        "additionalProperties": True,
        "default": {},
        "title": "Metadata",
        "description": "OpenEnv's Action.metadata (its clients send it with every typed action): accepted and ignored.",
    }
    return schema


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
        name: {
            **spec,
            "description": f"The action's `{name}` at the top level, instead of inside `action` (not both). "
            + spec.get("description", ""),
        }
        for name, spec in core.Action.model_json_schema()["properties"].items()
        if name in TOP_LEVEL_ACTION_FIELDS
    }

    action: dict[str, Any] | None = Field(
        default=None, description='The action, e.g. {"decision": "request_info"}; or put its fields at the top level.'
    )
    action_type: str | None = Field(
        default=None, max_length=64, description='Seed A\'s top-level form: the decision, e.g. "approve_refund".'
    )
    episode_id: str | None = Field(
        default=None,
        max_length=255,
        description="From POST /reset. Without it: the episode of the ecomm_episode cookie POST /reset sets "
        "(or, on a SINGLE_SESSION server, of the latest reset).",
    )
    request_id: RequestId
    timeout_s: float | None = Field(
        default=None, gt=0, description="Accepted for OpenEnv compatibility; steps are fast."
    )
    run_token: RunToken = None
    episode_token: EpisodeToken

    def the_action(self) -> Any:
        """The action payload, wherever the body put it (parsed by ``parse_action``)."""
        top = {k: v for k, v in (self.model_extra or {}).items() if k in TOP_LEVEL_ACTION_FIELDS}
        if ACTION_TYPE in self.model_fields_set:
            top[ACTION_TYPE] = self.action_type
        if self.action is not None and top:
            raise InvalidRequest(
                "give the action either inside `action` or as top-level fields, not both "
                f"(top level: {', '.join(sorted(top))})",
                errors=[{"field": "action", "message": "given twice", "type": "conflict"}],
            )
        if self.action is None and not top:
            raise InvalidRequest(
                'send the action: {"action": {"decision": "request_info"}} or its fields at the top level '
                '({"action_type": "reject"}); GET /schema shows every field',
                errors=[{"field": "action", "message": "field required", "type": "missing"}],
            )
        return self.action if self.action is not None else top


class EpisodeArguments(ClosedBody):
    """Arguments of the MCP ``state`` and ``grade`` tools: which episode (a session's own by default)."""

    episode_id: str | None = Field(
        default=None,
        min_length=1,
        max_length=255,
        description="From the reset tool (or POST /reset); an MCP session's own episode if omitted.",
    )
    episode_token: EpisodeToken


class StateArguments(EpisodeArguments):
    """Arguments of the MCP ``state`` tool: a test episode's progress is its run token holder's only."""

    run_token: RunToken = None


class StepArguments(EpisodeArguments):
    """Arguments of the MCP ``step`` tool."""

    action: dict[str, Any] = Field(
        description='The action\'s fields, e.g. {"decision": "request_info"}; GET /schema shows every field.'
    )
    request_id: RequestId
    run_token: RunToken = None


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


class GraderResponse(msgspec.Struct, omit_defaults=True):
    """``GET /grader?episode_id=…`` (also the MCP ``grade`` tool and the episode page): the stored grade of a
    finished episode. A msgspec struct: built once per episode and encoded natively."""

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


class StepView(TypedDict):
    index: int
    action: dict[str, Any]
    observation: dict[str, Any]
    reward: float | None  # None while rewards are withheld (a run in progress)
    done: bool


class EpisodeView(TypedDict):
    """``GET /episodes/{id}``: everything the episode viewer shows."""

    episode_id: str
    state: dict[str, Any]  # core.public_state: the visible ticket state
    ticket_id: str
    ticket_text: str
    instructions: str
    steps: list[StepView]
    grade: GraderResponse | None
    rewards_hidden: bool


# TypedDicts with optional keys are written as a required base and a ``total=False`` subclass: with
# postponed annotations (this module's ``from __future__``), ``NotRequired[...]`` is not seen by
# TypedDict, so OpenAPI would call every key required.


class _JsonRpcErrorRequired(TypedDict):
    code: int
    message: str


class JsonRpcError(_JsonRpcErrorRequired, total=False):
    data: Any


class _JsonRpcResponseRequired(TypedDict):
    jsonrpc: str  # "2.0"
    id: Any


class JsonRpcResponse(_JsonRpcResponseRequired, total=False):
    """``POST /mcp`` (and a WS ``mcp`` frame's data): always a JSON-RPC 2.0 object, HTTP 200."""

    result: dict[str, Any]
    error: JsonRpcError
