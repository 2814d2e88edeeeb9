"""The task registry: one environment, nine tasks that differ in goal and grader.

A task is its declaration (:class:`TaskSpec`): the pool it draws tickets from — one (family,
difficulty) cell of a split; the seed picks the ticket —, its rubric, its step cap, what ends the
episode, the reply it grades and what closing requires. Grading, the reference agents and the
services read these properties, never a task id, so a new task is its declaration plus its data
(docs/development.md). No task id implies its answer: every cell mixes gold decisions (see
:mod:`service.env.generator`).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from service.env.dataset import family_pool_size
from service.env.errors import DifficultyMismatch, UnknownDifficulty, UnknownTask
from service.env.models import DECISIONS, OUTCOME_TAGS, QUEUES, Action
from service.env.store.grading import STORE_CHECKS
from service.env.store.tools import TOOLS as STORE_TOOLS
from service.env.world import TICKET_FAMILIES, Difficulty, Family

DECISION_MAX_STEPS = 6
WORKFLOW_MAX_STEPS = 10
STORE_MAX_STEPS = 40
MAX_SEED = 2**31 - 1
"""The largest seed a reset takes: seeds are stored as signed 32-bit integers (the episodes table, and
every client that reads them back); larger pools are never needed, since seeds wrap around a pool."""

NEEDLESS_QUESTION_COST = 0.05
"""Every task charges the same for asking the customer something the policy did not need."""

_ASKING = (
    "To ask the customer something, send `decision: request_info` with your question in `reply` (ask in "
    "your own words for what you need: photos, the item's condition, whether the parcel turned up, or what "
    "the problem is); their answer arrives in `history`, and whatever they tell you counts as known. Asking "
    "when the policy needs the answer is required; a question it did not need (the facts you could already "
    f"see decided the claim) fails the episode and costs {NEEDLESS_QUESTION_COST:g}. Lookups (`lookup`: "
    "policy, order, customer) are free."
)
# Triage and routing need no answer from the customer to be graded, but asking is judged the same way.
_ASKING_COSTS = (
    "You may ask the customer something (`decision: request_info` with your question in `reply`); their "
    "answer arrives in `history`. As in every task, a question the policy did not need (the facts you could "
    f"already see decided the claim) fails the episode and costs {NEEDLESS_QUESTION_COST:g}. Lookups "
    "(`lookup`: policy, order, customer) are free."
)


def _either(values: tuple[str, ...]) -> str:
    """``a, b or c``: the instructions name the values of the core's types, never a copy of them."""
    return ", ".join(values[:-1]) + " or " + values[-1]


_TEAMS = tuple(q for q in QUEUES if q != "General")  # General is where tickets arrive, no team's
_DECIDED = tuple(d for d in DECISIONS if d != "request_info")  # request_info asks and decides nothing
_RECORDED = tuple(t for t in OUTCOME_TAGS if t != "Needs_Info")  # a resolution decides: nothing is left to ask


def _step_limit(max_steps: int) -> str:
    return f"If you have not finished after {max_steps} steps, the episode ends there and is graded as it stands."


_DECISION_INSTRUCTIONS = (
    "You are a support agent for an online store. Read the ticket and decide the claim under the store "
    f"policy with the `decision` field: {_either(_DECIDED)} — that decision counts as "
    "your answer and ends the episode (request_info does not: it asks the customer and the episode goes on). " + _ASKING
)
_TRIAGE_INSTRUCTIONS = (
    "Triage this ticket: add the one tag that records the outcome the store policy requires "
    f"({_either(OUTCOME_TAGS)}) with `add_tag`, then close it with "
    "`close_ticket: true`, which ends the episode. The outcome tag on the ticket when it is closed counts as "
    "your answer; a second outcome tag voids the tag. " + _ASKING_COSTS
)
_ROUTING_INSTRUCTIONS = (
    "Route this ticket: reassign it (`reassign_queue`) to the team that owns it under the store policy "
    f"({_either(_TEAMS)}) — the team you reassign it to counts as your answer, and a "
    "reassignment to another team counts against you — send the customer a courteous holding reply (`reply`) "
    "that quotes the order id, says the ticket is with the right team and promises no outcome, then close "
    "your part with `close_ticket: true`, which ends the episode. Do not decide the claim yourself. " + _ASKING_COSTS
)
_RESOLUTION_INSTRUCTIONS = (
    "Resolve this ticket end to end: consult the store policy (`lookup: policy`), decide the claim "
    f"(`decision`: {_either(_DECIDED)} — the first of these counts as your decision, "
    "and changing it later counts against you), add the one outcome tag that records it (`add_tag`: "
    f"{_either(_RECORDED)}), tell the customer (`reply`, with the decision or "
    "after it) — courteous, quoting the order id, stating the decision and, when declining, the actual "
    "reason in your own words — and close it (`close_ticket: true`), which ends the episode. " + _ASKING
)


class Criterion(BaseModel):
    """One check of a task's rubric (τ²-bench style: outcome, required actions, what was communicated)."""

    model_config = ConfigDict(frozen=True)

    name: str
    weight: float = Field(description="Share of the partial score (normalised over the criteria that apply).")
    required: bool = Field(description="Must pass for the episode to count as resolved.")
    gate: str | None = Field(
        default=None, description="Earns credit only when this criterion (the task's core outcome) passed."
    )
    applies: Literal["always", "information_needed"] = Field(
        default="always",
        description="information_needed: only on tickets where the policy requires asking the customer.",
    )
    description: str


class Penalty(BaseModel):
    """A deduction from the partial score, each time the behaviour occurs (shaping only)."""

    model_config = ConfigDict(frozen=True)

    name: str
    amount: float
    description: str


class Rubric(BaseModel):
    """How a task is graded: the one table that grading reads and that /tasks and the docs render."""

    model_config = ConfigDict(frozen=True)

    criteria: tuple[Criterion, ...]
    penalties: tuple[Penalty, ...]

    def describe(self) -> str:
        """The rubric as prose (what agents read in /tasks)."""
        parts = []
        for c in self.criteria:
            flags = ["required" if c.required else "optional"]
            if c.gate:
                flags.append(f"counts only when {c.gate} passed")
            if c.applies == "information_needed":
                flags.append("only where the policy requires asking")
            weight = f"weight {c.weight:g}" if c.weight else "no weight"
            parts.append(f"{c.name} ({weight}; {', '.join(flags)}): {c.description}")
        penalties = "; ".join(f"{p.name} -{p.amount:g}: {p.description}" for p in self.penalties)
        return (
            "Resolved = every required check passes (what pass^k and the leaderboard count). "
            "Partial score (for RL shaping) = the weighted share of checks passed, minus penalties, clipped to [0, 1]; "
            "step rewards are its changes. Checks: "
            + " | ".join(parts)
            + (f". Penalties: {penalties}." if penalties else ".")
        )


def render_rubrics_markdown() -> str:
    """Every task's rubric as a Markdown table (the README embeds it; a test fails when they drift)."""
    lines = ["| task | check | weight | required | counts only when | applies |", "|---|---|---:|:---:|---|---|"]
    for task in TASKS.values():
        for c in task.rubric.criteria:
            applies = "where the policy requires asking" if c.applies == "information_needed" else "always"
            lines.append(
                f"| `{task.id}` | **{c.name}**: {c.description} | {c.weight:g} | {'yes' if c.required else 'no'} | "
                f"{c.gate or '—'} | {applies} |"
            )
    lines += ["", "| task | penalty | amount, each time |", "|---|---|---:|"]
    for task in TASKS.values():
        lines += [f"| `{task.id}` | **{p.name}**: {p.description} | −{p.amount:g} |" for p in task.rubric.penalties]
    return "\n".join(lines) + "\n"


ReplyRole = Literal["answer", "holding"]
Prerequisite = Literal["outcome_tag", "queue", "decision", "reply"]
Answer = Literal["decision", "tag", "queue"]


class TaskSpec(BaseModel):
    """A task's declaration: everything grading, the agents and the services know about it."""

    model_config = ConfigDict(frozen=True)

    id: str
    family: Family = Field(description="With difficulty, the pool of tickets the task draws from.")
    difficulty: Difficulty
    title: str
    description: str
    grader: str
    rubric: Rubric
    max_steps: int = Field(description="The step cap: the episode ends there (truncated) and is graded as it stands.")
    ends_on_decision: bool = Field(
        default=False, description="A decision (request_info aside) ends the episode; otherwise closing does."
    )
    reply: ReplyRole | None = Field(
        default=None,
        description="What the reply checks read: the answer (the replies sent with the decision or after it, "
        "judged against it) or a holding reply (every reply, judged as promising no outcome); none graded if null.",
    )
    close_after: tuple[Prerequisite, ...] = Field(
        default=(),
        description="What the `closed` check needs before the close: the outcome tag on, the queue set, the "
        "decision made, the graded reply sent.",
    )
    instructions: str
    action_schema: dict[str, Any]

    def grades(self, check: str) -> bool:
        """Whether the rubric has the check ``check`` (``outcome_tag``, ``queue``, ``policy_lookup`` …)."""
        return any(c.name == check for c in self.rubric.criteria)

    @property
    def answer(self) -> Answer | None:
        """What counts as the agent's answer, the one its pool balances: the decision, else the team, else the
        outcome tag the rubric grades (None at the store desk, graded on the store's final state)."""
        for check, answer in (("decision", "decision"), ("queue", "queue"), ("outcome_tag", "tag")):
            if self.grades(check):
                return answer  # type: ignore[return-value]
        return None

    @property
    def store_desk(self) -> bool:
        """Played with the store desk's tool calls on a store's records (else: one ticket's action fields)."""
        return self.family not in TICKET_FAMILIES


_NEEDLESS = Penalty(
    name="needless_question", amount=NEEDLESS_QUESTION_COST, description="each request_info the policy did not need"
)
_CONDUCT = Criterion(
    name="conduct",
    weight=0.0,
    required=True,
    description="no reply is rude, leaks internal risk notes, or promises an outcome the agent's own decision denies",
)
_RUDE = Penalty(name="forbidden_reply", amount=0.2, description="a reply that breaks the conduct rule")
# Asking is judged in every task by the one rule the policy gives: a question is needed while the facts known
# leave the verdict at request_info. A needed question never costs anything (validity.md §5: honest asking
# is not punished, a question the customer misread included); a needless one fails the episode.
_NO_NEEDLESS_QUESTION = Criterion(
    name="no_needless_question",
    weight=0.0,
    required=True,
    description="asked the customer nothing the policy did not need: each request_info came while the facts "
    "known still left the claim undecided (photos, the item's condition, whether the parcel turned up, what "
    "the problem is)",
)
_INFORMATION = Criterion(
    name="information",
    weight=0.3,
    required=True,
    applies="information_needed",
    description="asked the customer for what the policy needs (photos, the item's condition, whether the parcel "
    "turned up, what the problem is) and got the answer before deciding",
)

DECISION_RUBRIC = Rubric(
    criteria=(
        _INFORMATION,
        Criterion(
            name="decision",
            weight=0.7,
            required=True,
            description="the decision is the policy's for the facts known when deciding (an acceptable "
            "alternative earns half; a harmful one - approving what the policy forbids or "
            "rejecting an evidenced claim - earns -0.5)",
        ),
        _CONDUCT,
        _NO_NEEDLESS_QUESTION,
    ),
    penalties=(_NEEDLESS, _RUDE),
)
TRIAGE_RUBRIC = Rubric(
    criteria=(
        Criterion(
            name="outcome_tag",
            weight=0.6,
            required=True,
            description=f"exactly one outcome tag ({', '.join(OUTCOME_TAGS)}) "
            "is on the ticket, and it is the one the policy requires",
        ),
        Criterion(name="closed", weight=0.4, required=True, gate="outcome_tag", description="closed with that tag on"),
        _CONDUCT,
        _NO_NEEDLESS_QUESTION,
    ),
    penalties=(_NEEDLESS, _RUDE, Penalty(name="repetition", amount=0.05, description="each repeated tag")),
)
ROUTING_RUBRIC = Rubric(
    criteria=(
        Criterion(
            name="queue",
            weight=0.4,
            required=True,
            description="reassigned to the team that owns the ticket, and never to another one",
        ),
        Criterion(
            name="reply_courteous",
            weight=0.15,
            required=True,
            gate="queue",
            description="the holding reply is courteous",
        ),
        Criterion(
            name="reply_order_id",
            weight=0.1,
            required=True,
            gate="queue",
            description="the holding reply quotes the order id",
        ),
        Criterion(
            name="reply_no_outcome",
            weight=0.15,
            required=True,
            gate="queue",
            description="the holding reply says the ticket is with the right team, neither grants nor refuses "
            "anything (a condition like 'if approved, you will be refunded' promises nothing), and "
            "states nothing false",
        ),
        Criterion(
            name="closed", weight=0.2, required=True, gate="queue", description="closed after routing and replying"
        ),
        Criterion(name="hands_off", weight=0.0, required=True, description="does not decide the claim itself"),
        _CONDUCT,
        _NO_NEEDLESS_QUESTION,
    ),
    penalties=(
        _NEEDLESS,
        _RUDE,
        Penalty(name="wrong_queue", amount=0.2, description="each reassignment to a team that does not own the ticket"),
        Penalty(name="decided", amount=0.2, description="deciding the claim instead of routing it"),
        Penalty(name="closed_without_reply", amount=0.3, description="closing before replying to the customer"),
        Penalty(name="repetition", amount=0.05, description="each repeated reassignment or tag"),
    ),
)
RESOLUTION_RUBRIC = Rubric(
    criteria=(
        Criterion(
            name="policy_lookup", weight=0.1, required=True, description="looked up the store policy before deciding"
        ),
        _INFORMATION.model_copy(update={"weight": 0.15}),
        Criterion(
            name="decision",
            weight=0.3,
            required=True,
            description="the decision (request_info aside) is the policy's for the facts known when deciding, "
            "and it is never changed afterwards (alternative half, harmful -0.5)",
        ),
        Criterion(
            name="outcome_tag",
            weight=0.15,
            required=True,
            gate="decision",
            description="exactly one outcome tag is on the ticket, and it records the decision",
        ),
        Criterion(
            name="reply_outcome",
            weight=0.12,
            required=True,
            gate="decision",
            description="the reply (sent with the decision or after it) states the decision plainly; a denial "
            "gives the actual reason in any words (the window only when the time limit is the reason)",
        ),
        Criterion(
            name="reply_order_id",
            weight=0.06,
            required=True,
            gate="decision",
            description="the reply quotes the order id",
        ),
        Criterion(
            name="reply_courteous", weight=0.06, required=True, gate="decision", description="the reply is courteous"
        ),
        Criterion(
            name="reply_clean",
            weight=0.06,
            required=True,
            gate="decision",
            description="the reply is not rude, leaks no risk notes, does not contradict itself or promise what "
            "it declines, and every reason, time limit, warranty length or amount it states is true",
        ),
        Criterion(
            name="closed", weight=0.15, required=True, gate="decision", description="closed after deciding and replying"
        ),
        _CONDUCT,
        _NO_NEEDLESS_QUESTION,
    ),
    penalties=(
        _NEEDLESS,
        _RUDE,
        Penalty(name="contradiction", amount=0.2, description="each later decision that differs from the first"),
        Penalty(name="closed_without_reply", amount=0.3, description="closing before replying to the customer"),
        Penalty(name="repetition", amount=0.05, description="each repeated tag"),
    ),
)


STORE_RUBRIC = Rubric(
    criteria=tuple(
        Criterion(name=c.name, weight=c.weight, required=True, gate=c.gate, description=c.description)
        for c in STORE_CHECKS
    ),
    penalties=(),
)


def _store_instructions() -> str:
    tools = "; ".join(f"{t.name} — {t.description.rstrip('.')}" for t in STORE_TOOLS) + "."
    return (
        "You are an agent at an online store's support desk, working on the account of the person who wrote in. "
        'Each step is one tool call: {"tool": <name>, "arguments": {...}} (GET /tasks and MCP tools/list give '
        "every tool's JSON schema). Handle every request in the message the way the store policy requires — search "
        "it with search_policy and read sections with read_policy — using the account's records, and talk to the "
        "customer with send_message (their answer arrives in history and in tool_result). A call the store's "
        "backend refuses comes back as an error in tool_result; nothing changes then. The episode is graded on the "
        "store's final state (which orders and lines, amounts to the cent, where money goes, variants, labels, "
        "queues), on how it got there (identity verified, records read, what the customer needed to tell you, their "
        "yes before each change) and on what you told the customer; end with end_conversation. Tools: " + tools
    )


def _task(
    id: str,
    family: Family,
    difficulty: Difficulty,
    title: str,
    description: str,
    rubric: Rubric,
    instructions: str,
    max_steps: int,
    *,
    ends_on_decision: bool = False,
    reply: ReplyRole | None = None,
    close_after: tuple[Prerequisite, ...] = (),
) -> TaskSpec:
    return TaskSpec(
        id=id,
        family=family,
        difficulty=difficulty,
        title=title,
        description=description,
        grader=rubric.describe(),
        rubric=rubric,
        max_steps=max_steps,
        ends_on_decision=ends_on_decision,
        reply=reply,
        close_after=close_after,
        instructions=f"{instructions} {_step_limit(max_steps)}",
        action_schema=Action.model_json_schema(),
    )


TASKS: dict[str, TaskSpec] = {
    t.id: t
    for t in (
        _task(
            "decision-easy",
            "decision",
            "easy",
            "Returns desk: clear-cut claims",
            "Single claims stated plainly by ordinary customers: returns inside or outside the window, "
            "damage with or without photos, wrong items, billing errors.",
            DECISION_RUBRIC,
            _DECISION_INSTRUCTIONS,
            DECISION_MAX_STEPS,
            ends_on_decision=True,
        ),
        _task(
            "decision-medium",
            "decision",
            "medium",
            "Returns desk: one rule in the way",
            "Claims where one further fact decides: stock, final-sale or hygiene items, carrier status, "
            "the item's condition, the payment record. Lookups help.",
            DECISION_RUBRIC,
            _DECISION_INSTRUCTIONS,
            DECISION_MAX_STEPS,
            ends_on_decision=True,
        ),
        _task(
            "decision-hard",
            "decision",
            "hard",
            "Returns desk: interacting rules",
            "Rules that override each other — high-risk accounts, warranty after the window, late parcels, "
            "vague or multi-issue messages, typos.",
            DECISION_RUBRIC,
            _DECISION_INSTRUCTIONS,
            DECISION_MAX_STEPS,
            ends_on_decision=True,
        ),
        _task(
            "workflow-triage",
            "workflow",
            "easy",
            "Ticket triage",
            "Tag the ticket with the outcome the policy requires and close it.",
            TRIAGE_RUBRIC,
            _TRIAGE_INSTRUCTIONS,
            WORKFLOW_MAX_STEPS,
            close_after=("outcome_tag",),
        ),
        _task(
            "workflow-routing",
            "workflow",
            "medium",
            "Ticket routing and holding reply",
            "Hand the ticket to the team that owns it (Escalations for large refunds, Fraud, Billing, "
            "Returns) with a courteous holding reply.",
            ROUTING_RUBRIC,
            _ROUTING_INSTRUCTIONS,
            WORKFLOW_MAX_STEPS,
            reply="holding",
            close_after=("queue", "reply"),
        ),
        _task(
            "workflow-resolution",
            "workflow",
            "hard",
            "Full resolution with policy-grounded reply",
            "Look up the policy, decide, tag, reply with the real reason (and window), close.",
            RESOLUTION_RUBRIC,
            _RESOLUTION_INSTRUCTIONS,
            WORKFLOW_MAX_STEPS,
            reply="answer",
            close_after=("decision", "reply"),
        ),
        _task(
            "store-easy",
            "store",
            "easy",
            "Store desk: one request",
            "One customer, one request about one of their one or two orders — damage, a wrong or missing item, a "
            "return, a cancellation, an address, a late parcel, a double charge — settled with the store's tools.",
            STORE_RUBRIC,
            _store_instructions(),
            STORE_MAX_STEPS,
        ),
        _task(
            "store-medium",
            "store",
            "medium",
            "Store desk: records to combine",
            "One or two requests across several orders: promo codes spread over lines, gift cards, partial "
            "quantities, restocking fees, exchanges, facts the customer must be asked for, large refunds.",
            STORE_RUBRIC,
            _store_instructions(),
            STORE_MAX_STEPS,
        ),
        _task(
            "store-hard",
            "store",
            "hard",
            "Store desk: several requests, the policy in full",
            "Two or three requests on an account with many orders: amounts from several rules, split payments, "
            "earlier refunds, a customer whose account of events the records contradict, who pushes for what the "
            "policy forbids, changes their mind, writes for someone else or pastes instructions.",
            STORE_RUBRIC,
            _store_instructions(),
            STORE_MAX_STEPS,
        ),
    )
}


# Other names of the tasks, accepted wherever a task id is (this core, HTTP, WS, MCP, runs; GET /tasks
# lists them) for the two earlier designs' clients: seed A's easy|medium|hard were refund decisions;
# seed B's easy|medium|hard were workflows — tag and close, escalate with a holding reply (its
# "triage": our routing), a policy-grounded denial — and are spelt workflow-<difficulty> here.
TASK_ALIASES: dict[str, str] = {
    "easy": "decision-easy",
    "medium": "decision-medium",
    "hard": "decision-hard",
    "workflow-easy": "workflow-triage",
    "workflow-medium": "workflow-routing",
    "triage": "workflow-routing",
    "workflow-hard": "workflow-resolution",
}


TICKET_TASKS: dict[str, TaskSpec] = {k: t for k, t in TASKS.items() if t.family in TICKET_FAMILIES}
"""The six tasks over one support ticket (decision and workflow families); the store desk's are the rest."""


def get_task(task_id: str) -> TaskSpec:
    """The task of an id or an alias (case and ``_`` for ``-`` ignored in an alias)."""
    task = TASKS.get(task_id) or TASKS.get(TASK_ALIASES.get(task_id.strip().lower().replace("_", "-"), ""))
    if task is None:
        aliases = ", ".join(f"{a} ({t})" for a, t in TASK_ALIASES.items())
        raise UnknownTask(f"unknown task_id {task_id!r}; choose one of: {', '.join(TASKS)}, or an alias: {aliases}")
    return task


def choose_task(
    task_id: str | None, difficulty: str | None, seed: int, pool: tuple[str, ...] | None = None
) -> TaskSpec:
    """The task of a reset: the one named (an id or an alias), else the one of the asked difficulty — the
    task its name is an alias of (seed A's easy|medium|hard), else one by seed —, else one of ``pool`` (task
    ids; the ticket tasks by default) by seed. Raises :class:`UnknownTask`, :class:`UnknownDifficulty` or
    :class:`DifficultyMismatch`."""
    if task_id is not None:
        task = get_task(task_id)
        if difficulty is not None and task.difficulty != difficulty:
            raise DifficultyMismatch(
                f"task {task.id!r} has difficulty {task.difficulty!r}, not {difficulty!r}; pass one of them only"
            )
        return task
    if difficulty is not None:
        matching = [t for t in TASKS.values() if t.difficulty == difficulty]
        if not matching:
            known = sorted({t.difficulty for t in TASKS.values()})
            raise UnknownDifficulty(f"no task has difficulty {difficulty!r}; use one of: {', '.join(known)}")
        named = [t for t in matching if t.id == TASK_ALIASES.get(difficulty)]
        return (named or matching)[seed % len(named or matching)]
    ids = pool or tuple(TICKET_TASKS)
    return TASKS[ids[seed % len(ids)]]


class ManifestEntry(BaseModel):
    model_config = ConfigDict(frozen=True)

    index: int
    task_id: str
    seed: int
    trial: int


MAX_TRIALS = 8


def run_manifest(
    split: str, task_ids: list[str] | None = None, trials: int = 1, limit_per_task: int | None = None
) -> list[ManifestEntry]:
    """Every episode of a run, in play order: each ticket of each task's pool, ``trials`` times.

    Entries interleave tasks (trial-major, then seed, then task) so a partly played run covers
    every task evenly. A pure function of its arguments: the server, not the agent, picks tickets.
    """
    chosen = [get_task(t) for t in (task_ids or list(TASKS))]
    if len({t.id for t in chosen}) != len(chosen):
        raise ValueError("task_ids lists a task twice")
    if not 1 <= trials <= MAX_TRIALS:
        raise ValueError(f"trials must be between 1 and {MAX_TRIALS}")
    sizes = {t.id: family_pool_size(split, t.family, t.difficulty) for t in chosen}  # type: ignore[arg-type]
    if limit_per_task is not None:
        if limit_per_task < 1:
            raise ValueError("limit_per_task must be at least 1")
        sizes = {k: min(v, limit_per_task) for k, v in sizes.items()}
    entries = [
        (trial, seed, order, task.id)
        for trial in range(trials)
        for order, task in enumerate(chosen)
        for seed in range(sizes[task.id])
    ]
    entries.sort()
    return [ManifestEntry(index=i, task_id=t, seed=s, trial=tr) for i, (tr, s, _, t) in enumerate(entries)]
