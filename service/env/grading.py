"""Graders: a pure function of (task, ticket, the episode's acts) → :class:`Grade`.

The same function scores unfinished prefixes, which is how step rewards are made: the reward of a
step is the change it causes in the raw score, so the rewards of an episode add up to its raw
score and the score (raw clipped to [0, 1]) can always be recomputed from stored transitions.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from service.env.dataset import load_ticket
from service.env.models import Act, EpisodeState, Grade, GradeComponent
from service.env.policy import (
    REASONS,
    REASONS_WITH_WINDOW,
    Verdict,
    evaluate,
    full_information_verdict,
)
from service.env.tasks import get_task
from service.env.world import Ticket

GRADER_VERSION = "1.0.0"

GOLD, ALTERNATIVE, WRONG, HARMFUL = 1.0, 0.5, 0.0, -0.5
NEEDLESS_INFO_COST = 0.1
OUTCOME_TAGS = frozenset({"Refund", "Replacement", "Policy_Denied", "Needs_Info", "Fraud_Risk"})

_COURTESY = ("sorry", "apolog", "thank", "appreciate", "please", "happy to help", "kind regards", "understand")
_RUDE = ("stupid", "idiot", "shut up", "your fault", "not our problem", "whatever", "ridiculous", "calm down", "dumb")
_LEAK = ("fraud", "high-risk", "high risk", "risk score", "risk assessment", "flagged", "chargeback", "internal note", "blacklist")
_PROMISE = (
    "will refund", "will be refunded", "refund has been", "refund is on its way", "issued a refund", "processed your refund",
    "approved your refund", "refund approved", "will send a replacement", "replacement is on its way", "approved your",
)
_APPROVAL_WORDS = {"approve_refund": ("refund",), "approve_replacement": ("replacement", "replace", "new one")}


HIDDEN_SPLIT = "test"


def results_hidden(split: str, run_complete: bool) -> bool:
    """Rewards and scores of a test-split episode stay hidden until its run completes."""
    return split == HIDDEN_SPLIT and not run_complete


def redact_grade(grade: dict) -> dict:
    """A served test-split grade: component scores only. Details and clause ids name the gold label."""
    return {
        **grade,
        "components": [{"name": c["name"], "earned": c["earned"], "weight": c["weight"]} for c in grade.get("components", [])],
        "clauses": [],
        "redacted": "test split: component details and clause ids are not served",
    }


def decision_value(decision: str, verdict: Verdict, ticket: Ticket) -> float:
    """Gold 1.0, alternative 0.5, wrong 0.0, harmful -0.5 — against the verdict the agent faced.

    While the policy still requires information, deciding is wrong, and harmful when the full
    facts would forbid that decision.
    """
    if verdict.gold == "request_info":
        return HARMFUL if decision in full_information_verdict(ticket).harmful else WRONG
    if decision == verdict.gold:
        return GOLD
    if decision in verdict.alternatives:
        return ALTERNATIVE
    if decision in verdict.harmful:
        return HARMFUL
    return WRONG


def _has(text: str, phrases: tuple[str, ...]) -> bool:
    return any(p in text for p in phrases)


def forbidden_content(reply: str, *, denying: bool) -> list[str]:
    """What is wrong with a reply: rudeness, leaked internal notes, a promise the decision denies."""
    text = reply.lower()
    problems = []
    if _has(text, _RUDE):
        problems.append("rude")
    if _has(text, _LEAK):
        problems.append("leaks internal risk notes")
    if denying and _has(text, _PROMISE):
        problems.append("promises an outcome it denies")
    return problems


@dataclass
class _Walk:
    """The episode's acts folded into the facts graders need."""

    decisions: list[tuple[str, frozenset[str]]] = field(default_factory=list)  # (decision, revealed before it)
    tags: list[str] = field(default_factory=list)
    queues: list[str] = field(default_factory=list)
    replies: list[str] = field(default_factory=list)
    lookups: list[str] = field(default_factory=list)
    closed: bool = False
    replied_before_close: bool = False
    decided_before_close: bool = False
    policy_before_decision: bool = False
    routed_before_close: bool = False
    tag_before_close: list[str] = field(default_factory=list)
    revealed: set[str] = field(default_factory=set)


def _walk(acts: tuple[Act, ...]) -> _Walk:
    w = _Walk()
    for act in acts:
        if act.kind == "revealed":
            w.revealed.add(act.value)
        elif act.kind == "decision":
            if not w.decisions:
                w.policy_before_decision = "policy" in w.lookups
            w.decisions.append((act.value, frozenset(w.revealed)))
        elif act.kind == "tag":
            w.tags.append(act.value)
        elif act.kind == "queue":
            w.queues.append(act.value)
        elif act.kind == "reply":
            w.replies.append(act.value)
        elif act.kind == "lookup":
            w.lookups.append(act.value)
        elif act.kind == "close" and not w.closed:
            w.closed = True
            w.replied_before_close = bool(w.replies)
            w.decided_before_close = bool(w.decisions)
            w.routed_before_close = bool(w.queues)
            w.tag_before_close = list(w.tags)
    return w


def grade_episode(state: EpisodeState) -> Grade:
    """Score the episode (finished or not) from its acts. Pure and deterministic."""
    task = get_task(state.task_id)
    ticket = load_ticket(state.ticket_id)
    w = _walk(state.acts)
    grader = _GRADERS[task.id if task.family == "workflow" else "decision"]
    components = grader(ticket, w)
    raw = round(sum(c.earned for c in components), 6)
    clauses = tuple(dict.fromkeys(c for comp in components for c in comp.clauses))
    return Grade(
        task_id=task.id,
        ticket_id=ticket.ticket_id,
        score=min(1.0, max(0.0, raw)),
        raw=raw,
        components=tuple(components),
        clauses=clauses,
        grader_version=GRADER_VERSION,
        finished=state.done,
    )


# ----------------------------------------------------------------------------- decision family

def _grade_decision(t: Ticket, w: _Walk) -> list[GradeComponent]:
    initial = evaluate(t)
    comps: list[GradeComponent] = []
    asks = [(d, rev) for d, rev in w.decisions if d == "request_info"]
    final = next(((d, rev) for d, rev in w.decisions if d != "request_info"), None)

    needless = sum(1 for _, rev in asks if evaluate(t, rev).gold != "request_info")
    if initial.gold == "request_info":
        asked_first = bool(w.decisions) and w.decisions[0][0] == "request_info"
        comps.append(GradeComponent(
            name="asked_for_information", earned=0.5 if asked_first else 0.0, weight=0.5,
            detail="asked the customer before deciding" if asked_first else "the policy required asking the customer first",
            clauses=initial.clauses,
        ))
        if final is not None:
            verdict = evaluate(t, final[1]) if asked_first else initial
            value = decision_value(final[0], verdict, t)
            comps.append(GradeComponent(
                # Deciding without asking is never positive (decision_value is 0 or harmful).
                name="decision", earned=value * 0.5 if asked_first else value, weight=0.5, detail=f"{final[0]} against gold {verdict.gold}: {verdict.rationale}", clauses=verdict.clauses,
            ))
    elif final is not None:
        value = decision_value(final[0], initial, t)
        comps.append(GradeComponent(
            name="decision", earned=value, weight=1.0,
            detail=f"{final[0]} against gold {initial.gold}: {initial.rationale}", clauses=initial.clauses,
        ))
    if final is None:
        comps.append(GradeComponent(name="no_final_decision", earned=0.0, weight=0.0, detail="the episode has no final decision yet"))
    if needless:
        comps.append(GradeComponent(
            name="needless_request_info", earned=-NEEDLESS_INFO_COST * needless, weight=0.0,
            detail=f"{needless} request(s) for information the policy did not need", clauses=initial.clauses,
        ))
    return comps


# ----------------------------------------------------------------------------- workflow family

def _tag_penalties(w: _Walk, expected: str | None, wrong_cost: float = 0.0) -> list[GradeComponent]:
    """Wrong outcome tags (when the task grades the outcome) and repeated tags."""
    comps = []
    wrong = [tag for tag in w.tags if expected and tag in OUTCOME_TAGS and tag != expected]
    if wrong:
        comps.append(GradeComponent(name="wrong_tag", earned=-wrong_cost * len(wrong), weight=0.0,
                                    detail=f"outcome tag(s) {', '.join(wrong)} contradict the policy outcome {expected}"))
    repeats = len(w.tags) - len(set(w.tags))
    if repeats:
        comps.append(GradeComponent(name="repeated_tag", earned=-0.05 * repeats, weight=0.0, detail=f"{repeats} repeated tag(s)"))
    return comps


def _forbidden_penalty(w: _Walk, denying: bool, amount: float) -> list[GradeComponent]:
    problems = sorted({p for r in w.replies for p in forbidden_content(r, denying=denying)})
    if not problems:
        return []
    return [GradeComponent(name="forbidden_content", earned=-amount, weight=0.0, detail="; ".join(problems))]


def _grade_triage(t: Ticket, w: _Walk) -> list[GradeComponent]:
    v = evaluate(t)
    tagged = v.tag in w.tags
    comps = [
        GradeComponent(name="outcome_tag", earned=0.6 if tagged else 0.0, weight=0.6,
                       detail=f"expected tag {v.tag}: {v.rationale}", clauses=v.clauses),
        GradeComponent(name="closed", earned=0.4 if w.closed and v.tag in w.tag_before_close else 0.0, weight=0.4,
                       detail="closed after tagging correctly" if w.closed else "ticket not closed"),
    ]
    return comps + _tag_penalties(w, v.tag, wrong_cost=0.25) + _forbidden_penalty(w, denying=v.gold == "reject", amount=0.2)


def _courtesy_and_id(t: Ticket, text: str) -> tuple[bool, bool]:
    return _has(text, _COURTESY), t.order.order_id.lower() in text


def _grade_routing(t: Ticket, w: _Walk) -> list[GradeComponent]:
    v = evaluate(t)
    final_queue = w.queues[-1] if w.queues else "General"
    comps = [GradeComponent(name="queue", earned=0.4 if final_queue == v.queue else 0.0, weight=0.4,
                            detail=f"expected queue {v.queue}, final queue {final_queue}", clauses=v.clauses)]
    wrong = [q for q in w.queues if q != v.queue]
    if wrong:
        comps.append(GradeComponent(name="wrong_queue", earned=-0.2 * len(wrong), weight=0.0, detail=f"reassigned to {', '.join(wrong)}"))
    repeats = sum(1 for a, b in zip(w.queues, w.queues[1:]) if a == b)
    if repeats:
        comps.append(GradeComponent(name="repeated_queue", earned=-0.05 * repeats, weight=0.0, detail=f"{repeats} repeated reassignment(s)"))
    text = " ".join(w.replies).lower()
    courteous, quotes_id = _courtesy_and_id(t, text)
    clean = bool(w.replies) and not any(forbidden_content(r, denying=True) for r in w.replies)
    comps += [
        GradeComponent(name="reply_courtesy", earned=0.15 if courteous else 0.0, weight=0.15, detail="courteous holding reply" if courteous else "no courteous reply"),
        GradeComponent(name="reply_order_id", earned=0.1 if quotes_id else 0.0, weight=0.1, detail=f"reply quotes {t.order.order_id}" if quotes_id else "reply does not quote the order id"),
        GradeComponent(name="reply_no_promise", earned=0.15 if clean else 0.0, weight=0.15,
                       detail="no promised outcome or forbidden content" if clean else "no reply, or it promises an outcome / is rude / leaks risk notes"),
        GradeComponent(name="closed", earned=0.2 if w.closed and w.replied_before_close and w.routed_before_close else 0.0, weight=0.2,
                       detail="closed after routing and replying" if w.closed else "not closed"),
    ]
    if w.closed and not w.replied_before_close:
        comps.append(GradeComponent(name="closed_without_reply", earned=-0.3, weight=0.0, detail="closed before replying to the customer"))
    if w.decisions:
        comps.append(GradeComponent(name="decided_instead_of_routing", earned=-0.2, weight=0.0, detail="the owning team decides this claim, not triage"))
    return comps + _tag_penalties(w, expected=None)


def _reply_states_outcome(v: Verdict, text: str) -> tuple[bool, str]:
    if v.gold == "reject":
        reason_ok = v.reason is not None and _has(text, REASONS[v.reason])
        window_ok = v.reason not in REASONS_WITH_WINDOW or _has(text, REASONS["window"])
        ok = reason_ok and window_ok
        need = f"the reason ({v.reason})" + (" and the 30-day window" if v.reason in REASONS_WITH_WINDOW else "")
        return ok, (f"states {need}" if ok else f"does not state {need}")
    words = _APPROVAL_WORDS.get(v.gold, ())
    ok = _has(text, words)
    return ok, ("confirms the " + v.gold.removeprefix("approve_")) if ok else f"does not confirm the {v.gold.removeprefix('approve_')}"


def _grade_resolution(t: Ticket, w: _Walk) -> list[GradeComponent]:
    v = evaluate(t)
    comps = [GradeComponent(name="policy_lookup", earned=0.1 if w.policy_before_decision else 0.0, weight=0.1,
                            detail="looked up the policy before deciding" if w.policy_before_decision else "decided without consulting the policy")]
    if w.decisions:
        first = w.decisions[0][0]
        value = decision_value(first, v, t)
        comps.append(GradeComponent(name="decision", earned=0.3 * value, weight=0.3,
                                    detail=f"{first} against gold {v.gold}: {v.rationale}", clauses=v.clauses))
        changed = len({d for d, _ in w.decisions}) - 1
        if changed:
            comps.append(GradeComponent(name="contradictory_decision", earned=-0.2 * changed, weight=0.0, detail="changed the decision after making it"))
    else:
        comps.append(GradeComponent(name="decision", earned=0.0, weight=0.3, detail="no decision", clauses=v.clauses))
    comps.append(GradeComponent(name="outcome_tag", earned=0.15 if v.tag in w.tags else 0.0, weight=0.15, detail=f"expected tag {v.tag}"))
    comps += _tag_penalties(w, v.tag, wrong_cost=0.1)
    text = " ".join(w.replies).lower()
    outcome_ok, outcome_detail = _reply_states_outcome(v, text) if w.replies else (False, "no reply")
    courteous, quotes_id = _courtesy_and_id(t, text)
    clean = bool(w.replies) and not any(forbidden_content(r, denying=v.gold == "reject") for r in w.replies)
    comps += [
        GradeComponent(name="reply_reason", earned=0.12 if outcome_ok else 0.0, weight=0.12, detail=outcome_detail, clauses=v.clauses),
        GradeComponent(name="reply_order_id", earned=0.06 if quotes_id else 0.0, weight=0.06, detail=f"quotes {t.order.order_id}" if quotes_id else "does not quote the order id"),
        GradeComponent(name="reply_courtesy", earned=0.06 if courteous else 0.0, weight=0.06, detail="courteous" if courteous else "not courteous"),
        GradeComponent(name="reply_clean", earned=0.06 if clean else 0.0, weight=0.06, detail="no forbidden content" if clean else "no reply, or forbidden content"),
        GradeComponent(name="closed", earned=0.15 if w.closed and w.replied_before_close and w.decided_before_close else 0.0, weight=0.15,
                       detail="closed after deciding and replying" if w.closed else "not closed"),
    ]
    if w.closed and not w.replied_before_close:
        comps.append(GradeComponent(name="closed_without_reply", earned=-0.3, weight=0.0, detail="closed before replying to the customer"))
    return comps


_GRADERS = {
    "decision": _grade_decision,
    "workflow-triage": _grade_triage,
    "workflow-routing": _grade_routing,
    "workflow-resolution": _grade_resolution,
}
