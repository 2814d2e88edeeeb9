"""Action, observation and episode-state value types: the contract of the core.

``Action`` is what an agent sends, ``Observation`` what it sees, ``EpisodeState`` the complete
internal state of one episode (persisted by the service as a JSON snapshot). All three are
pydantic v2 models; ``Action`` rejects unknown fields and values with precise messages.
"""

from __future__ import annotations

from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic_core import PydanticCustomError

from service.env.store.state import StoreProgress
from service.env.world import Split

Decision = Literal["approve_refund", "approve_replacement", "reject", "request_info"]
Queue = Literal["General", "Returns", "Billing", "Escalations", "Fraud"]
OutcomeTag = Literal["Refund", "Replacement", "Policy_Denied", "Needs_Info", "Fraud_Risk"]  # record an outcome
Tag = Literal[
    OutcomeTag,
    "Escalated",
    "Billing",
    "Shipping",
    "Damaged",
    "Wrong_Item",
]
LookupTarget = Literal["policy", "order", "customer"]
Status = Literal["open", "awaiting_customer", "closed"]

# The value lists, derived from the Literal types above (one definition each).
DECISIONS: tuple[Decision, ...] = get_args(Decision)
QUEUES: tuple[Queue, ...] = get_args(Queue)
TAGS: tuple[Tag, ...] = get_args(Tag)
OUTCOME_TAGS: tuple[OutcomeTag, ...] = get_args(OutcomeTag)
LOOKUP_TARGETS: tuple[LookupTarget, ...] = get_args(LookupTarget)
MAX_REPLY_CHARS = 2000
MAX_TOOL_NAME = 64
ACTION_FIELDS = ("decision", "reply", "reassign_queue", "add_tag", "close_ticket", "lookup", "tool", "arguments")
ACTION_TYPE = "action_type"
"""Seed A's name for ``decision`` (its server's only action field): accepted wherever an action is, on every
transport, by :class:`Action` itself."""
ACTION_TYPE_CONFLICT = "conflict"  # the error type of an action_type that contradicts the decision


class Action(BaseModel):
    """One agent move. Every field is optional; several may be combined in one step.

    Seed A's body ``{"action_type": "approve_refund"}`` is accepted as an alias of ``decision``.
    Within one step the parts apply in this order: lookup, reassign_queue, add_tag, reply,
    decision, close_ticket — so the question of a ``request_info`` is the ``reply`` of that step.

    A **tool call** — ``{"tool": "refund", "arguments": {...}}`` — is an action of its own: every task
    lists its tools (``GET /tasks``, MCP ``tools/list``). The store desk's tasks take only tool calls;
    in the other tasks each tool stands for one of the fields above (``decide``, ``reply``, ``route``,
    ``tag``, ``lookup``, ``close``).
    """

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    decision: Decision | None = Field(
        default=None,
        description="The resolution of the claim. request_info asks the customer; say what you need in `reply`.",
    )
    reply: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_REPLY_CHARS,
        description="A message to the customer.",
    )
    reassign_queue: Queue | None = Field(default=None, description="Move the ticket to this queue.")
    add_tag: Tag | None = Field(default=None, description="Add this tag to the ticket.")
    close_ticket: bool = Field(default=False, description="Close the ticket (ends a workflow episode).")
    lookup: LookupTarget | None = Field(
        default=None,
        description="Look up the store policy, the order record or the customer record; the result arrives in "
        "`tool_result`.",
    )

    tool: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_TOOL_NAME,
        description="A tool call: the tool's name (GET /tasks lists each task's tools); alone, with `arguments`.",
    )
    arguments: dict[str, Any] | None = Field(
        default=None, description="The tool call's arguments, as the tool's JSON schema describes them."
    )

    @model_validator(mode="before")
    @classmethod
    def _accept_action_type_alias(cls, data: Any) -> Any:
        if isinstance(data, dict) and ACTION_TYPE in data:
            data = dict(data)
            alias = data.pop(ACTION_TYPE)
            if data.get("decision") is not None and data["decision"] != alias:
                raise PydanticCustomError(
                    ACTION_TYPE_CONFLICT,
                    "give the decision once: `decision` or its alias `action_type`, not both with different values",
                )
            data["decision"] = alias
        return data

    @model_validator(mode="after")
    def _not_empty(self) -> Action:
        fields = self.decision, self.reply, self.reassign_queue, self.add_tag, self.lookup
        legacy = any(f is not None for f in fields) or self.close_ticket
        if self.tool is not None and legacy:
            raise ValueError("a tool call is an action of its own: send `tool` and `arguments` without other fields")
        if self.arguments is not None and self.tool is None:
            raise ValueError("`arguments` belong to a tool call: name the tool in `tool`")
        if self.tool is None and not legacy:
            raise ValueError(
                "an action must set at least one of: decision, reply, reassign_queue, add_tag, close_ticket, lookup "
                "— or be a tool call (`tool` and `arguments`)"
            )
        return self

    def as_json(self) -> dict[str, Any]:
        """The action as stored and compared (idempotency): a ticket action keeps the shape it had before tool
        calls existed, so rows stored then still match."""
        return self.model_dump(mode="json", exclude={"tool", "arguments"} if self.tool is None else None)


class HistoryEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    role: Literal["customer", "agent", "system"]
    text: str


class Observation(BaseModel):
    """What the agent sees after reset and after every step. Never contains gold or hidden facts."""

    model_config = ConfigDict(extra="forbid")

    ticket_id: str
    task_id: str
    ticket: str = Field(description="Seed A's plain-text ticket: header fields and the customer message.")
    customer_message: str
    current_queue: Queue
    tags: list[Tag]
    status: Status
    history: list[HistoryEntry]
    tool_result: dict[str, Any] | str | None = None
    last_action_error: str | None = None
    instructions: str
    step_count: int
    max_steps: int
    final: bool = Field(
        default=False,
        description="True on the observation that ends the episode: `done`, kept inside the observation (the "
        "wire lifts `done` out of it).",
    )
    truncated: bool = Field(
        default=False,
        description="On the final observation: the episode ended on its step cap (max_steps), not by the agent "
        "(Gymnasium's truncated; done without truncated is an ending the agent chose).",
    )
    score: float | None = Field(
        default=None, description="On the final observation: the episode score in [0, 1] (null when withheld)."
    )
    resolved: bool | None = Field(
        default=None, description="On the final observation: every required check passed (null when withheld)."
    )
    reward: float | None = None
    done: bool = False


ActKind = Literal["lookup", "queue", "tag", "decision", "reply", "close", "revealed"]


class Act(BaseModel):
    """One applied part of an action (or the customer revealing a topic), in episode order."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    step: int
    kind: ActKind
    value: str


class EpisodeState(BaseModel):
    """The complete internal state of one episode; a pure value, replaced (never mutated) by ``step``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    task_id: str
    split: Split
    seed: int
    ticket_id: str
    step_count: int = 0
    max_steps: int
    queue: Queue = "General"
    tags: tuple[Tag, ...] = ()
    status: Status = "open"
    history: tuple[HistoryEntry, ...] = ()
    revealed: tuple[str, ...] = ()  # hidden-fact topics the customer has answered
    acts: tuple[Act, ...] = ()  # everything that happened, in order: what graders read
    tool_result: dict[str, Any] | str | None = None
    last_action_error: str | None = None
    rewards: tuple[float, ...] = ()
    done: bool = False
    truncated: bool = False
    store: StoreProgress | None = None  # the store desk's calls and their effects (store tasks only)

    def as_json(self) -> dict[str, Any]:
        """The state as stored: a ticket episode's without the store desk's part (the shape it had before)."""
        return self.model_dump(mode="json", exclude={"store"} if self.store is None else None)


class GradeComponent(BaseModel):
    """One rubric check (``kind="check"``) or one penalty of an episode's grade."""

    model_config = ConfigDict(frozen=True)

    name: str
    kind: Literal["check", "penalty"] = "check"
    earned: float
    weight: float
    passed: bool | None = None  # checks only
    required: bool = False  # checks only: must pass for the episode to be resolved
    detail: str
    clauses: tuple[str, ...] = ()


class Grade(BaseModel):
    """The episode score in [0, 1] with its breakdown; a pure function of task, ticket and state."""

    model_config = ConfigDict(frozen=True)

    task_id: str
    ticket_id: str
    score: float  # partial credit in [0, 1], for shaping
    raw: float
    resolved: bool  # every required check passed: what pass^k and the leaderboard count
    components: tuple[GradeComponent, ...]
    clauses: tuple[str, ...]
    grader_version: str
    finished: bool


def view(
    state: EpisodeState, *, ticket_id: str, ticket: str, customer_message: str, instructions: str, reward: float | None
) -> Observation:
    """The agent's view of ``state`` (both desks'): where the episode ends, ``final`` and ``truncated`` come from
    the state here, and nowhere else. Built without a second validation per step: every value is the
    state's own, validated when it was made."""
    return Observation.model_construct(
        ticket_id=ticket_id,
        task_id=state.task_id,
        ticket=ticket,
        customer_message=customer_message,
        current_queue=state.queue,
        tags=list(state.tags),
        status=state.status,
        history=list(state.history),
        tool_result=state.tool_result,
        last_action_error=state.last_action_error,
        instructions=instructions,
        step_count=state.step_count,
        max_steps=state.max_steps,
        final=state.done,
        truncated=state.truncated,
        reward=reward,
        done=state.done,
    )


def cut_off(state: EpisodeState, step_count: int, ended: bool) -> bool:
    """Whether an episode the agent has not ``ended`` ends after ``step_count`` steps, on its step cap."""
    return not ended and step_count >= state.max_steps


class StepResult(BaseModel):
    model_config = ConfigDict(frozen=True)

    state: EpisodeState
    observation: Observation
    reward: float
    done: bool
    grade: Grade  # of the new state: its raw score made the reward (the final grade when done)
