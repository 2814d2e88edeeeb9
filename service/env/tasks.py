"""The task registry: one environment, six tasks that differ in goal and grader.

A task draws its tickets from one (family, difficulty) cell of a split; the seed picks the ticket.
No task id implies its answer: every cell mixes gold decisions (see :mod:`service.env.generator`).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from service.env.dataset import tickets_for
from service.env.errors import UnknownTask
from service.env.models import Action
from service.env.world import Difficulty, Family

DECISION_MAX_STEPS = 6
WORKFLOW_MAX_STEPS = 10

_DECISION_INSTRUCTIONS = (
    "You are a support agent for an online store. Read the ticket and decide the claim under the store "
    "policy with the `decision` field: approve_refund, approve_replacement, reject, or request_info. "
    "A decision other than request_info ends the episode. With request_info, put your question to the "
    "customer in `reply` (say exactly what you need: photos, the item's condition, whether the parcel "
    "turned up, or what the problem is); their answer arrives in `history`. You may first look up the "
    "policy, the order record or the customer record with `lookup`."
)
_TRIAGE_INSTRUCTIONS = (
    "Triage this ticket: add the one tag that records the outcome the store policy requires "
    "(Refund, Replacement, Policy_Denied, Needs_Info or Fraud_Risk) with `add_tag`, then close it with "
    "`close_ticket: true`. Lookups (`lookup`: policy, order, customer) are free."
)
_ROUTING_INSTRUCTIONS = (
    "Route this ticket: reassign it (`reassign_queue`) to the team that owns it under the store policy "
    "(Returns, Billing, Escalations or Fraud), send the customer a courteous holding reply (`reply`) that "
    "quotes the order id and promises no outcome, then close your part with `close_ticket: true`. Do not "
    "decide the claim yourself. Closing without a reply is penalised. Lookups are free."
)
_RESOLUTION_INSTRUCTIONS = (
    "Resolve this ticket end to end: consult the store policy (`lookup: policy`), decide the claim "
    "(`decision`), add the outcome tag (`add_tag`: Refund, Replacement, Policy_Denied or Fraud_Risk), "
    "reply to the customer (`reply`) — courteous, quoting the order id, and when declining stating the "
    "actual reason and, where a time limit applies, the window — and close it (`close_ticket: true`)."
)


class TaskSpec(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: str
    family: Family
    difficulty: Difficulty
    title: str
    description: str
    grader: str
    max_steps: int
    instructions: str
    action_schema: dict[str, Any]


def _task(id: str, family: Family, difficulty: Difficulty, title: str, description: str, grader: str, instructions: str) -> TaskSpec:
    max_steps = DECISION_MAX_STEPS if family == "decision" else WORKFLOW_MAX_STEPS
    return TaskSpec(
        id=id,
        family=family,
        difficulty=difficulty,
        title=title,
        description=description,
        grader=grader,
        max_steps=max_steps,
        instructions=instructions,
        action_schema=Action.model_json_schema(),
    )


_DECISION_GRADER = (
    "Gold decision 1.0, acceptable alternative 0.5, wrong 0.0, harmful (approving what the policy forbids, "
    "or rejecting an evidenced claim) -0.5 as step reward and 0 as score. When the policy requires "
    "request_info, asking earns 0.5 and the decision after the customer's answer earns up to 0.5. Each "
    "needless request_info costs 0.1. Score = clip(sum of rewards, 0, 1)."
)

TASKS: dict[str, TaskSpec] = {
    t.id: t
    for t in (
        _task("decision-easy", "decision", "easy", "Returns desk: clear-cut claims",
              "Single claims stated plainly by ordinary customers: returns inside or outside the window, "
              "damage with or without photos, wrong items, billing errors.", _DECISION_GRADER, _DECISION_INSTRUCTIONS),
        _task("decision-medium", "decision", "medium", "Returns desk: one rule in the way",
              "Claims where one further fact decides: stock, final-sale or hygiene items, carrier status, "
              "the item's condition, the payment record. Lookups help.", _DECISION_GRADER, _DECISION_INSTRUCTIONS),
        _task("decision-hard", "decision", "hard", "Returns desk: interacting rules",
              "Rules that override each other — high-risk accounts, warranty after the window, late parcels, "
              "vague or multi-issue messages, typos.", _DECISION_GRADER, _DECISION_INSTRUCTIONS),
        _task("workflow-triage", "workflow", "easy", "Ticket triage",
              "Tag the ticket with the outcome the policy requires and close it.",
              "Correct outcome tag 0.6; closing after tagging correctly 0.4. A wrong outcome tag -0.25, a "
              "repeated tag -0.05, forbidden reply content -0.2. Score = clip(sum, 0, 1).", _TRIAGE_INSTRUCTIONS),
        _task("workflow-routing", "workflow", "medium", "Ticket routing and holding reply",
              "Hand the ticket to the team that owns it (Escalations for large refunds, Fraud, Billing, "
              "Returns) with a courteous holding reply.",
              "Final queue correct 0.4 (each wrong reassignment -0.2, a repeated one -0.05); holding reply: "
              "courtesy 0.15, order id 0.1, no promised outcome or forbidden content 0.15; closing after "
              "routing and replying 0.2; closing without any reply -0.3; deciding the claim -0.2. "
              "Score = clip(sum, 0, 1).", _ROUTING_INSTRUCTIONS),
        _task("workflow-resolution", "workflow", "hard", "Full resolution with policy-grounded reply",
              "Look up the policy, decide, tag, reply with the real reason (and window), close.",
              "Policy lookup before deciding 0.1; decision 0.3 (alternative 0.15, harmful -0.3); outcome tag "
              "0.15 (wrong -0.1); reply 0.3 = reason/confirmation 0.12 + order id 0.06 + courtesy 0.06 + no "
              "forbidden content 0.06; closing after deciding and replying 0.15; closing without a reply -0.3; "
              "a second, different decision -0.2. Score = clip(sum, 0, 1).", _RESOLUTION_INSTRUCTIONS),
    )
}


def get_task(task_id: str) -> TaskSpec:
    try:
        return TASKS[task_id]
    except KeyError:
        raise UnknownTask(f"unknown task_id {task_id!r}; choose one of: {', '.join(TASKS)}") from None


class ManifestEntry(BaseModel):
    model_config = ConfigDict(frozen=True)

    index: int
    task_id: str
    seed: int
    trial: int


MAX_TRIALS = 8


def run_manifest(split: str, task_ids: list[str] | None = None, trials: int = 1, limit_per_task: int | None = None) -> list[ManifestEntry]:
    """Every episode of a run, in play order: each ticket of each task's pool, ``trials`` times.

    Entries interleave tasks (trial-major, then seed, then task) so a partly played run covers
    every task evenly. A pure function of its arguments: the server, not the agent, picks tickets.
    """
    chosen = [get_task(t) for t in (task_ids or list(TASKS))]
    if len({t.id for t in chosen}) != len(chosen):
        raise ValueError("task_ids lists a task twice")
    if not 1 <= trials <= MAX_TRIALS:
        raise ValueError(f"trials must be between 1 and {MAX_TRIALS}")
    sizes = {t.id: len(tickets_for(split, t.family, t.difficulty)) for t in chosen}  # type: ignore[arg-type]
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
