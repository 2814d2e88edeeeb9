"""The reply checks of the rubrics: what a reply says (:func:`meaning`), judged against the agent's own
decision, the policy's verdict and the ticket's facts (:func:`judge`).

:mod:`service.env.reader` reads the reply (its vocabulary is :mod:`service.env.vocabulary`, one data file
per concept); this module knows the policy: which reasons are true for a ticket, which limits, amounts and
teams are right, and what a resolution or a holding reply must state.
``tests/env/corpus/replies*.jsonl`` holds human-labelled replies; docs/methodology.md reports the false-
positive and false-negative rates on them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from service.env.policy import ESCALATION_THRESHOLD, RETURN_WINDOW_DAYS, Verdict
from service.env.reader import CLAIM, Elapsed, Meaning, meaning
from service.env.world import Ticket

__all__ = ["Judgement", "Meaning", "judge", "meaning", "true_reasons"]


# ------------------------------------------------------------------------------------ judging


@dataclass(frozen=True)
class Judgement:
    """The reply checks of the rubrics, with why each failed."""

    states_outcome: bool  # resolution: states the agent's decision (and, declining, the actual reason)
    no_outcome: bool  # routing: a holding reply that neither grants nor refuses
    courteous: bool
    quotes_order_id: bool
    clean: bool  # no rudeness, leaks, contradiction, promise against the decision, false reason or fact
    problems: tuple[str, ...] = ()


def true_reasons(ticket: Ticket, revealed: frozenset[str]) -> frozenset[str]:
    """Denial reasons whose facts are true for this ticket (a reply may assert these without lying)."""
    from service.env.policy import carrier_confirms_loss

    t, order, product = ticket, ticket.order, ticket.product
    out = set()
    days = order.days_since_delivery
    if days is not None and days > RETURN_WINDOW_DAYS:
        out.add("window")
    used = True if t.claim.issue == "item_used" else t.claim.item_used
    if used is None and "usage" in revealed:
        used = t.hidden.item_used
    if used:
        out.add("used")
    if product.final_sale or product.hygiene or product.perishable:
        out.add("final_sale")
    if days is not None and days > product.warranty_days:
        out.add("warranty")
    if t.hidden.photos_show == "normal_wear" and "photos" in revealed:
        out.add("normal_wear")
    if order.carrier_status == "in_transit" and not carrier_confirms_loss(t):
        out.add("in_transit")
    if t.hidden.parcel_found and "delivery" in revealed:
        out.add("parcel_found")
    if order.charges == 1:
        out.add("not_charged_twice")
    if t.customer.high_risk:
        out.add("unverifiable")
    return frozenset(out)


# Reasons that, stated as fact in a holding reply, settle the claim the team was asked to decide.
_FINDINGS = frozenset({"not_charged_twice", "window", "used", "final_sale", "warranty", "normal_wear", "unverifiable"})

# A holding reply is written before anyone has asked the customer: it may not know what photos would show.
_UNSEEN_FACTS = frozenset({"normal_wear"})


def _facts_problems(m: Meaning, ticket: Ticket, verdict: Verdict | None) -> list[str]:
    problems = []
    if any(d != RETURN_WINDOW_DAYS for d in m.window_days):
        problems.append(f"states a return window of {sorted(m.window_days)} days; it is {RETURN_WINDOW_DAYS}")
    warranty = ticket.product.warranty_days
    if any(abs(d - warranty) > (5 if d >= 30 else 0) for d in m.warranty_days):
        problems.append(f"states a warranty of {sorted(m.warranty_days)} days; it is {warranty}")
    allowed = {ESCALATION_THRESHOLD, ticket.line.amount}
    if verdict is not None:
        allowed.add(verdict.refund_amount)
    if m.partial:
        problems.append("states a part of the refund; the refund is the claim's whole amount")
    if any(all(abs(a - ok) > 0.01 for ok in allowed) for a in m.amounts):
        problems.append(
            f"states an amount ({', '.join(f'${a:.2f}' for a in sorted(m.amounts))}) that is not the refund"
        )
    return problems


def judge(
    reply: str, ticket: Ticket, decision: str | None, verdict: Verdict | None, revealed: frozenset[str]
) -> Judgement:
    """The reply checks for ``reply`` on ``ticket``, against the agent's own ``decision`` (None when
    routing) and the policy's ``verdict`` for the facts known when it decided."""
    m = meaning(reply)
    conduct = (  # what makes a reply unclean
        _manner_problems(m, decision)
        + _untrue_problems(m, ticket, decision, verdict, revealed)
        + _team_problems(m, decision, verdict)
    )
    states, outcome = _states_decision(m, decision, verdict)
    # A finding stated as fact ("there was only one charge") settles what the team was asked to decide. (Not
    # the parcel's whereabouts: "the team has it now" and "with you soon" read as in transit or found.)
    settles = (m.reasons - m.scoped) & _FINDINGS
    # P14: a holding reply says who will handle the ticket ("we're looking into it" names no one)
    no_outcome = not m.grants and not m.refuses and m.holds and m.names_handler and not m.prejudges and not settles
    if decision is None and m.prejudges:
        outcome.append("a holding reply must not guess the team's decision")
    if decision is None and settles:
        outcome.append("a holding reply must not state a finding that settles the claim: " + ", ".join(sorted(settles)))
    if decision is None and not no_outcome:
        outcome.append("a holding reply must neither grant nor refuse, and say who handles the ticket")
    digits = re.sub(r"\D", "", ticket.order.order_id)
    quotes = digits in m.order_digits
    if not quotes:
        outcome.append("does not quote the order id")
    if not m.courteous or m.rude:
        outcome.append("not courteous")
    return Judgement(
        states_outcome=states,
        no_outcome=no_outcome,
        courteous=m.courteous and not m.rude,
        quotes_order_id=quotes,
        clean=not conduct,
        problems=tuple(conduct + outcome),
    )


def _manner_problems(m: Meaning, decision: str | None) -> list[str]:
    """Rudeness, leaks, and a reply that contradicts itself or the decision."""
    problems = []
    if m.rude:
        problems.append("rude")
    if m.leaks:
        problems.append("leaks internal risk notes (" + ", ".join(sorted(set(m.leaks))) + ")")
    if m.covered and "warranty" in m.reasons - m.scoped:
        problems.append("contradicts itself: says the item is covered by its warranty and that the warranty has ended")
    if _contradicts(m):
        problems.append("contradicts itself: grants " + " and ".join(sorted(m.grants)) + " and refuses")
    elif decision == "reject" and m.grants:
        problems.append("promises " + " and ".join(sorted(m.grants)) + " while declining")
    elif decision == "reject" and m.options:
        problems.append("offers " + " and ".join(sorted(m.options)) + " at the customer's choice while declining")
    elif decision == "reject" and m.promised_if:
        problems.append("promises " + " and ".join(sorted(m.promised_if)) + " if the parcel is late, while declining")
    return problems


def _contradicts(m: Meaning) -> bool:
    """Grants what it refuses, or refuses the claim and grants: refusing the replacement because it is out
    of stock and refunding instead refuses and grants different things."""
    return bool(m.grants) and bool(m.refused & (m.grants | {CLAIM}))


def _untrue_problems(
    m: Meaning, ticket: Ticket, decision: str | None, verdict: Verdict | None, revealed: frozenset[str]
) -> list[str]:
    """Reasons, facts, limits, amounts and dates the reply states that are not true of this ticket."""
    problems = []
    # Reasons are checked as denial reasons, where the reply declines: "a replacement is on its way" or
    # "whatever they find" in an approval or a holding reply asserts nothing about the claim.
    true = true_reasons(ticket, revealed)
    # A reason named only as a rule's scope ("we accept returns within 30 days") says nothing of this order.
    false = m.reasons - m.scoped - true - {"unverifiable"} if decision == "reject" or m.refuses else set()
    # Facts about the order are checked in every reply: a false one inside an approval or a holding
    # reply misinforms the customer just the same.
    false |= m.facts - true - (_UNSEEN_FACTS if decision is None else set())
    if false:
        problems.append("gives a reason that is not true here: " + ", ".join(sorted(false)))
    problems += _facts_problems(m, ticket, verdict)
    actual = ticket.order.days_since_delivery
    wrong = [d for d, kind in m.elapsed if actual is not None and not _elapsed_true(d, kind, actual)]
    if wrong:
        problems.append(f"states the item arrived {wrong[0]} days ago; it was {actual}")
    return problems


def _elapsed_true(days: int, kind: str, actual: int) -> bool:
    """Whether "it arrived ``days`` days ago", qualified by ``kind``, is true of ``actual`` days."""
    if kind == Elapsed.at_least:
        return actual >= days
    if kind == Elapsed.at_most:
        return actual <= days
    if kind == Elapsed.about:
        return abs(actual - days) <= max(3, round(0.2 * days))
    return abs(actual - days) <= 1


def _team_problems(m: Meaning, decision: str | None, verdict: Verdict | None) -> list[str]:
    """A holding reply tells the customer who handles the ticket: another team misinforms them."""
    if decision is not None or verdict is None or verdict.queue == "General":
        return []
    return [
        f"names the {team} team; the ticket went to {verdict.queue}"
        for team in sorted(m.teams - {verdict.queue, "Fraud"})
    ]


def _states_decision(m: Meaning, decision: str | None, verdict: Verdict | None) -> tuple[bool, list[str]]:
    """Whether a resolution reply states the agent's decision (declining, with the actual reason)."""
    if decision == "reject":
        valid = set(verdict.reasons if verdict is not None else ())
        if not m.reasons & valid:
            return False, [f"does not state the actual reason ({', '.join(sorted(valid)) or 'none'})"]
        if CLAIM in m.offers:  # "let me check whether we can make an exception"
            return False, ["leaves the decision open: an exception is still being considered"]
        return not m.grants, []
    if decision in ("approve_refund", "approve_replacement"):
        remedy = "refund" if decision == "approve_refund" else "replacement"
        other = "replacement" if remedy == "refund" else "refund"
        if remedy in m.grants and other not in m.grants and not m.refused & {remedy, CLAIM}:
            return True, []
        return False, [
            f"does not grant the {remedy} plainly" + (f" (it grants a {other})" if other in m.grants else "")
        ]
    return False, []
