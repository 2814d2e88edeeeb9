"""Graders: a pure function of (task, ticket, the episode's acts) → :class:`Grade`.

Each task declares its rubric (:mod:`service.env.tasks`): checks in the style of τ²-bench — the
core outcome (decision, queue or tag), the required actions (lookups, asking, closing) and what
was communicated (the reply). This module only implements the checks the rubrics name.

- **resolved** is binary: every required check that applies passed. It is what pass^k, the
  leaderboard and ``inference.py``'s ``success`` count.
- **score** is the partial credit kept for RL shaping: the weighted share of checks passed — a
  check gated on the core outcome earns nothing while that outcome is wrong — minus penalties,
  clipped to [0, 1].

The same function scores unfinished prefixes, which is how step rewards are made: the reward of a
step is the change it causes in the raw score, so the rewards of an episode add up to its raw
score and the score can always be recomputed from stored transitions.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from itertools import pairwise

from service.env import models
from service.env.dataset import PUBLIC, Dataset
from service.env.models import Act, EpisodeState, Grade, GradeComponent
from service.env.policy import Verdict, evaluate
from service.env.replies import Judgement, judge
from service.env.store.grading import grade_store_episode
from service.env.tasks import TaskSpec, get_task
from service.env.world import Ticket, per_ticket

# 3.4: replies read by the data-driven reader (its class fixes); 3.3: the store desk reads told on meaning
GRADER_VERSION = "3.4.0"

GOLD, ALTERNATIVE, WRONG, HARMFUL = 1.0, 0.5, 0.0, -0.5
OUTCOME_TAGS = frozenset(models.OUTCOME_TAGS)


def decision_value(decision: str, verdict: Verdict, ticket: Ticket) -> float:
    """Gold 1.0, alternative 0.5, wrong 0.0, harmful -0.5 — against the verdict the agent faced.

    While the policy still requires information, any decision is wrong (0): the agent could not see
    what the answer would have been, so what it would have shown does not change the grade (P11).
    """
    if verdict.gold == "request_info":
        return WRONG
    if decision == verdict.gold:
        return GOLD
    if decision in verdict.alternatives:
        return ALTERNATIVE
    if decision in verdict.harmful:
        return HARMFUL
    return WRONG


# ------------------------------------------------------------------------------ memoisation

# The policy's verdicts and the reply judgements are pure functions of the ticket and their arguments, and
# every step of an episode grades the whole episode so far: the same verdicts and replies each time. They
# are kept per ticket object (:func:`~service.env.world.per_ticket`), bounded.
_MAX_JUDGEMENTS = 512  # per ticket: replies seen across every episode of it


class _TicketMemo:
    __slots__ = ("verdicts", "judgements")

    def __init__(self, _: Ticket) -> None:
        self.verdicts: dict[frozenset[str], Verdict] = {}
        self.judgements: dict[tuple[str, str | None, int, frozenset[str]], tuple[Verdict, Judgement]] = {}


_memo = per_ticket(_TicketMemo)


def _evaluate(ticket: Ticket, revealed: frozenset[str] = frozenset()) -> Verdict:
    """:func:`~service.env.policy.evaluate`, once per ticket and facts known."""
    verdicts = _memo(ticket).verdicts
    verdict = verdicts.get(revealed)
    if verdict is None:
        verdict = verdicts[revealed] = evaluate(ticket, revealed)
    return verdict


def _judge(reply: str, ticket: Ticket, decision: str | None, verdict: Verdict, revealed: frozenset[str]) -> Judgement:
    """:func:`~service.env.replies.judge`, once per ticket and arguments (the verdict by identity: the same
    object from :func:`_evaluate` each time, checked)."""
    judgements = _memo(ticket).judgements
    key = (reply, decision, id(verdict), revealed)
    hit = judgements.get(key)
    if hit is not None and hit[0] is verdict:
        return hit[1]
    judgement = judge(reply, ticket, decision, verdict, revealed)
    if len(judgements) >= _MAX_JUDGEMENTS:
        judgements.clear()
    judgements[key] = (verdict, judgement)
    return judgement


# ------------------------------------------------------------------------------- the episode


@dataclass
class _Walk:
    """The episode's acts folded into the facts graders need."""

    decisions: list[tuple[str, frozenset[str]]] = field(default_factory=list)  # (decision, revealed before it)
    decision_steps: list[int] = field(default_factory=list)
    tags: list[tuple[str, frozenset[str]]] = field(default_factory=list)  # (tag, revealed before it)
    queues: list[str] = field(default_factory=list)
    replies: list[str] = field(default_factory=list)
    reply_steps: list[int] = field(default_factory=list)
    lookups: list[str] = field(default_factory=list)
    closed: bool = False
    replied_before_close: bool = False
    decided_before_close: bool = False
    policy_before_decision: bool = False
    answered_before_close: bool = False
    routed_before_close: bool = False
    tags_before_close: list[str] = field(default_factory=list)
    revealed: set[str] = field(default_factory=set)

    @property
    def real_decisions(self) -> list[tuple[str, frozenset[str]]]:
        """Decisions other than request_info (asking is not deciding)."""
        return [(d, rev) for d, rev in self.decisions if d != "request_info"]

    @property
    def answers(self) -> list[str]:
        """Replies that tell the customer the outcome: those sent with or after the decision (a
        request_info's question is not the answer)."""
        steps = [s for (d, _), s in zip(self.decisions, self.decision_steps, strict=True) if d != "request_info"]
        if not steps:
            return []
        return [r for r, s in zip(self.replies, self.reply_steps, strict=True) if s >= steps[0]]

    @property
    def outcome_tags(self) -> list[str]:
        return list(dict.fromkeys(tag for tag, _ in self.tags if tag in OUTCOME_TAGS))


def _walk(acts: tuple[Act, ...]) -> _Walk:
    w = _Walk()
    for act in acts:
        if act.kind == "revealed":
            w.revealed.add(act.value)
        elif act.kind == "decision":
            if act.value != "request_info" and not w.real_decisions:
                w.policy_before_decision = "policy" in w.lookups
            w.decisions.append((act.value, frozenset(w.revealed)))
            w.decision_steps.append(act.step)
        elif act.kind == "tag":
            w.tags.append((act.value, frozenset(w.revealed)))
        elif act.kind == "queue":
            w.queues.append(act.value)
        elif act.kind == "reply":
            w.replies.append(act.value)
            w.reply_steps.append(act.step)
        elif act.kind == "lookup":
            w.lookups.append(act.value)
        elif act.kind == "close" and not w.closed:
            w.closed = True
            w.replied_before_close = bool(w.replies)
            w.answered_before_close = bool(w.answers)
            w.decided_before_close = bool(w.real_decisions)
            w.routed_before_close = bool(w.queues)
            w.tags_before_close = [tag for tag, _ in w.tags]
    return w


@dataclass(frozen=True)
class _Context:
    """What the checks read; derived values are computed once per grade (several checks read each)."""

    ticket: Ticket
    walk: _Walk
    initial: Verdict  # the verdict before the customer answered anything
    task: TaskSpec

    @cached_property
    def reply(self) -> Judgement | None:
        """The reply the task grades (its declared ``reply``): a holding reply, or the answer."""
        return self.holding if self.task.reply == "holding" else self.answer

    @property
    def replied_before_close(self) -> bool:
        """Whether the reply the task grades was sent before the close (the answer: after the decision)."""
        w = self.walk
        return w.answered_before_close if self.task.reply == "answer" else w.replied_before_close

    @cached_property
    def decision(self) -> tuple[str, Verdict] | None:
        """The agent's decision (the first that is not request_info) and the verdict it faced."""
        real = self.walk.real_decisions
        if not real:
            return None
        decision, revealed = real[0]
        return decision, _evaluate(self.ticket, revealed)

    def judge_replies(self, replies: list[str], decision: str | None, verdict: Verdict) -> Judgement | None:
        return (
            _judge(" ".join(replies), self.ticket, decision, verdict, frozenset(self.walk.revealed))
            if replies
            else None
        )

    @cached_property
    def answer(self) -> Judgement | None:
        """The resolution reply judged against the agent's own decision."""
        decided = self.decision
        if decided is None:
            return None
        return self.judge_replies(self.walk.answers, decided[0], decided[1])

    @cached_property
    def holding(self) -> Judgement | None:
        """The routing reply, judged as a holding reply."""
        return self.judge_replies(self.walk.replies, None, self.initial)

    @cached_property
    def conduct(self) -> list[str]:
        """Problems of conduct across every reply of the episode (rude, leaks, promises)."""
        decided = self.decision
        bad: list[str] = []
        for reply in self.walk.replies:
            j = _judge(
                reply,
                self.ticket,
                decided[0] if decided else None,
                decided[1] if decided else self.initial,
                frozenset(self.walk.revealed),
            )
            bad += [p for p in j.problems if p.startswith(("rude", "leaks", "promises"))]
        return bad


@dataclass(frozen=True)
class _Check:
    value: float  # 1 passed, 0.5 acceptable alternative, 0 failed, -0.5 harmful
    detail: str
    clauses: tuple[str, ...] = ()


def _ok(passed: bool, yes: str, no: str) -> _Check:
    return _Check(1.0 if passed else 0.0, yes if passed else no)


# ---------------------------------------------------------------------------------- checks


def _information(c: _Context) -> _Check:
    real = c.walk.real_decisions
    revealed = real[0][1] if real else frozenset(c.walk.revealed)
    known = _evaluate(c.ticket, revealed)
    done = known.gold != "request_info"
    if done:
        return _Check(1.0, "asked the customer and learned what the policy needs", c.initial.clauses)
    when = "before deciding" if real else "yet"
    return _Check(
        0.0,
        f"the policy needs the customer's answer about {known.ask_topic} and it was not obtained {when}",
        known.clauses,
    )


def _decision(c: _Context) -> _Check:
    decided = c.decision
    if decided is None:
        return _Check(0.0, "no decision", c.initial.clauses)
    decision, verdict = decided
    value = decision_value(decision, verdict, c.ticket)
    later = {d for d, _ in c.walk.real_decisions[1:]} - {decision}
    if later:
        return _Check(
            min(value, WRONG), f"{decision} was changed afterwards to {', '.join(sorted(later))}", verdict.clauses
        )
    return _Check(value, f"{decision} against {verdict.gold}: {verdict.rationale}", verdict.clauses)


def _expected_tag(c: _Context) -> str:
    decided = c.decision
    if decided is not None:
        return decided[1].tag
    outcome = [(tag, rev) for tag, rev in c.walk.tags if tag in OUTCOME_TAGS]
    return _evaluate(c.ticket, outcome[-1][1]).tag if outcome else c.initial.tag


def _outcome_tag(c: _Context) -> _Check:
    expected, tags = _expected_tag(c), c.walk.outcome_tags
    if len(tags) > 1:
        return _Check(0.0, f"several outcome tags ({', '.join(tags)}) record contradictory outcomes")
    return _ok(
        tags == [expected],
        f"tagged {expected}",
        f"expected the outcome tag {expected}, got {tags[0] if tags else 'none'}",
    )


# What "closed" needs before the close (a task's ``close_after``), as (done, missing) phrases.
_BEFORE_CLOSE = {
    "queue": ("routing", "routing"),
    "decision": ("deciding", "deciding"),
    "reply": ("replying", "replying"),
}


def _closed(c: _Context) -> _Check:
    """Closed, and only after what the task's declaration lists (``close_after``)."""
    w, needs = c.walk, c.task.close_after
    done = {
        "outcome_tag": any(t in OUTCOME_TAGS for t in w.tags_before_close),
        "queue": w.routed_before_close,
        "decision": w.decided_before_close,
        "reply": c.replied_before_close,
    }
    acts = [n for n in needs if n != "outcome_tag"]
    yes, no = "closed", "not closed"
    if acts:
        yes += " after " + " and ".join(_BEFORE_CLOSE[n][0] for n in acts)
        no += " after " + " and ".join(
            "telling the customer" if n == "reply" and c.task.reply == "answer" else _BEFORE_CLOSE[n][1] for n in acts
        )
    if "outcome_tag" in needs:
        yes, no = yes + " with the outcome tag on", no + " with an outcome tag on"
    return _ok(w.closed and all(done[n] for n in needs), yes, no)


def _queue(c: _Context) -> _Check:
    expected, queues = c.initial.queue, c.walk.queues
    if not queues:
        return _Check(0.0, f"not reassigned (expected {expected})", c.initial.clauses)
    wrong = [q for q in queues if q != expected]
    if wrong:
        return _Check(0.0, f"reassigned to {', '.join(wrong)}; the ticket belongs to {expected}", c.initial.clauses)
    return _Check(1.0, f"routed to {expected}", c.initial.clauses)


def _judged(j: Judgement | None, passed: bool, yes: str, what: str) -> _Check:
    if j is None:
        return _Check(0.0, "no reply")
    return _ok(passed, yes, f"{what}: " + ("; ".join(j.problems) or "see the rubric"))


def _reply_courteous(c: _Context) -> _Check:
    j = c.reply
    return _judged(j, j is not None and j.courteous, "courteous", "not courteous")


def _reply_order_id(c: _Context) -> _Check:
    j = c.reply
    return _judged(
        j, j is not None and j.quotes_order_id, f"quotes {c.ticket.order.order_id}", "does not quote the order id"
    )


def _reply_no_outcome(c: _Context) -> _Check:
    j = c.holding
    return _judged(
        j,
        j is not None and j.no_outcome and j.clean,
        "a holding reply that says who handles it and promises no outcome",
        "not a clean holding reply",
    )


def _reply_outcome(c: _Context) -> _Check:
    j = c.answer
    return _judged(
        j,
        j is not None and j.states_outcome,
        "states the decision (and the actual reason)",
        "does not state the outcome",
    )


def _reply_clean(c: _Context) -> _Check:
    j = c.answer
    return _judged(j, j is not None and j.clean, "no forbidden content", "forbidden content")


def _conduct(c: _Context) -> _Check:
    """Across every reply of the episode: no rudeness, no leaked risk notes, no promise the agent's own
    decision denies."""
    bad = c.conduct
    return _ok(not bad, "no forbidden reply content", "; ".join(dict.fromkeys(bad)))


def _policy_lookup(c: _Context) -> _Check:
    return _ok(
        c.walk.policy_before_decision, "looked up the policy before deciding", "decided without consulting the policy"
    )


def _no_needless_question(c: _Context) -> _Check:
    needless = _needless_questions(c)
    return _ok(
        not needless,
        "asked only what the policy needed",
        f"{needless} question(s) the policy did not need: the facts known already decided the claim",
    )


def _hands_off(c: _Context) -> _Check:
    decided = [d for d, _ in c.walk.real_decisions]
    return _ok(
        not decided,
        "left the decision to the owning team",
        f"decided the claim ({', '.join(decided)}) instead of routing it",
    )


_CHECKS: dict[str, Callable[[_Context], _Check]] = {
    "information": _information,
    "decision": _decision,
    "outcome_tag": _outcome_tag,
    "queue": _queue,
    "reply_courteous": _reply_courteous,
    "reply_order_id": _reply_order_id,
    "reply_no_outcome": _reply_no_outcome,
    "reply_outcome": _reply_outcome,
    "reply_clean": _reply_clean,
    "conduct": _conduct,
    "policy_lookup": _policy_lookup,
    "hands_off": _hands_off,
    "no_needless_question": _no_needless_question,
    "closed": _closed,
}


# -------------------------------------------------------------------------------- penalties


def _needless_questions(c: _Context) -> int:
    return sum(
        1 for d, rev in c.walk.decisions if d == "request_info" and _evaluate(c.ticket, rev).gold != "request_info"
    )


def _repetitions(c: _Context) -> int:
    tags = [t for t, _ in c.walk.tags]
    queues = c.walk.queues
    return (len(tags) - len(set(tags))) + sum(1 for a, b in pairwise(queues) if a == b)


_PENALTIES: dict[str, Callable[[_Context], int]] = {
    "needless_question": _needless_questions,
    "forbidden_reply": lambda c: int(_conduct(c).value < 1),
    "repetition": _repetitions,
    "wrong_queue": lambda c: sum(1 for q in c.walk.queues if q != c.initial.queue),
    "decided": lambda c: int(bool(c.walk.real_decisions)),
    "closed_without_reply": lambda c: int(c.walk.closed and not c.replied_before_close),
    "contradiction": lambda c: len({d for d, _ in c.walk.real_decisions}) - 1 if c.walk.real_decisions else 0,
}


# ------------------------------------------------------------------------------------ grade


def grade_episode(state: EpisodeState, dataset: Dataset = PUBLIC) -> Grade:
    """Score the episode (finished or not) from its acts. Pure and deterministic."""
    task = get_task(state.task_id)
    if task.store_desk:
        return grade_store_episode(state, dataset.store_ticket(state.ticket_id), GRADER_VERSION)
    ticket = dataset.ticket(state.ticket_id)
    ctx = _Context(ticket, _walk(state.acts), _evaluate(ticket), task)
    info_needed = ctx.initial.gold == "request_info"
    criteria = [c for c in task.rubric.criteria if c.applies == "always" or info_needed]
    total = sum(c.weight for c in criteria) or 1.0
    passed: dict[str, bool] = {}
    components: list[GradeComponent] = []
    for criterion in criteria:
        check = _CHECKS[criterion.name](ctx)
        gated = criterion.gate is not None and not passed[criterion.gate]
        value = min(check.value, 0.0) if gated else check.value
        passed[criterion.name] = value >= GOLD
        detail = (
            f"{check.detail} — no credit while {criterion.gate} fails" if gated and check.value > 0 else check.detail
        )
        weight = criterion.weight / total
        components.append(
            GradeComponent(
                name=criterion.name,
                kind="check",
                earned=round(weight * value, 6),
                weight=round(weight, 6),
                passed=passed[criterion.name],
                required=criterion.required,
                detail=detail,
                clauses=check.clauses,
            )
        )
    for penalty in task.rubric.penalties:
        count = _PENALTIES[penalty.name](ctx)
        if count:
            components.append(
                GradeComponent(
                    name=penalty.name,
                    kind="penalty",
                    earned=round(-penalty.amount * count, 6),
                    weight=0.0,
                    detail=f"{count} × {penalty.description}",
                )
            )
    raw = round(max(-1.0, min(1.0, sum(c.earned for c in components))), 6)  # penalties stop at -1
    clauses = tuple(dict.fromkeys(cl for comp in components for cl in comp.clauses))
    return Grade(
        task_id=task.id,
        ticket_id=ticket.ticket_id,
        score=min(1.0, max(0.0, raw)),
        raw=raw,
        resolved=all(passed[c.name] for c in criteria if c.required),
        components=tuple(components),
        clauses=clauses,
        grader_version=GRADER_VERSION,
        finished=state.done,
    )
