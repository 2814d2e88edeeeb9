"""The executable store policy.

Each rule is a :class:`PolicyClause` (id, title, the text agents read). :func:`evaluate` applies
the rules to a ticket in the documented :data:`RESOLUTION_ORDER` and returns a :class:`Verdict`:
the gold decision, acceptable alternatives, harmful decisions, the deciding clause ids, a one-line
rationale, and what the workflow tasks need (queue, tag, the reason a denial must state).

The Markdown document served to agents (``lookup: policy``) is rendered from the same clauses, so
the text an agent reads and the code that grades it cannot drift apart.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict

from service.env.models import Decision, Queue, Tag
from service.env.world import IssueType, Ticket

RETURN_WINDOW_DAYS = 30
LATE_IN_TRANSIT_DAYS = 7
ESCALATION_THRESHOLD = 300.0
HIGH_RISK_RETURNS = 5

# Topics the scripted customer can be asked about; ``evaluate`` says which one a ticket needs.
INFO_TOPICS = ("photos", "usage", "delivery", "details")


@dataclass(frozen=True)
class PolicyClause:
    id: str
    title: str
    text: str


CLAUSES: tuple[PolicyClause, ...] = (
    PolicyClause(
        "P1",
        "Return window and condition",
        f"Change-of-mind and size returns are accepted within {RETURN_WINDOW_DAYS} days of delivery, "
        "and only for unused items (unworn, unwashed, in original packaging). Size issues are exchanged "
        "for another size when one is in stock, otherwise refunded; change-of-mind returns are refunded. "
        "If the item's condition is not stated, ask the customer before deciding. Used items and requests "
        f"after {RETURN_WINDOW_DAYS} days are declined.",
    ),
    PolicyClause(
        "P2",
        "Damaged or defective on arrival",
        f"Items that arrive damaged or defective and are reported within {RETURN_WINDOW_DAYS} days of "
        "delivery need photo evidence. Without photos, ask for them. With photos that show the damage, "
        "send a replacement when the item is in stock, otherwise refund. Photos that show ordinary wear "
        f"are not a defect: decline. Shipping damage reported after {RETURN_WINDOW_DAYS} days is declined.",
    ),
    PolicyClause(
        "P3",
        "Warranty",
        f"A defect that appears after {RETURN_WINDOW_DAYS} days but inside the product's warranty period "
        "is covered: replacement when in stock, otherwise refund. Beyond the warranty period, decline.",
    ),
    PolicyClause(
        "P4",
        "Wrong item delivered",
        f"If we shipped the wrong item and it is reported within {RETURN_WINDOW_DAYS} days, send the "
        "right one when in stock, otherwise refund. No photo is required.",
    ),
    PolicyClause(
        "P5",
        "Not received",
        f"If the carrier reports the parcel lost, returned to sender, or still in transit more than "
        f"{LATE_IN_TRANSIT_DAYS} days past its estimate, send a replacement when in stock, otherwise "
        "refund. If it is in transit and not yet that late, decline for now: it is on its way. If the "
        "carrier reports it delivered, ask the customer to check with neighbours and the delivery spot; "
        "if it is then found, decline; if not, treat it as lost.",
    ),
    PolicyClause(
        "P6",
        "Final sale and hygiene items",
        "Final-sale items, hygiene items (cosmetics, in-ear audio, personal care) and perishables "
        "cannot be returned for change of mind or size. Damage, defect and wrong-item claims still apply.",
    ),
    PolicyClause(
        "P7",
        "High-risk accounts",
        f"For a high-risk customer ({HIGH_RISK_RETURNS} or more returns in the last 12 months, any "
        "chargeback, or a fraud flag on the account), decline every claim that cannot be verified from "
        "order or carrier data (only carrier-confirmed non-delivery and billing errors can be). This "
        "overrides P1-P4 and P6. Never mention the risk assessment to the customer; route to Fraud.",
    ),
    PolicyClause(
        "P8",
        "Escalation of large refunds",
        f"Refunds above ${ESCALATION_THRESHOLD:.0f} are approved by the Escalations team: reassign the "
        "ticket to Escalations and send the customer a polite holding reply instead of resolving it.",
    ),
    PolicyClause(
        "P9",
        "Unclear requests",
        "If the message does not say what the problem is, ask the customer for details before deciding.",
    ),
    PolicyClause(
        "P10",
        "Billing errors",
        "A duplicate charge confirmed by the payment record is refunded (Billing queue). A reported "
        "duplicate charge that the payment record does not show is declined with an explanation.",
    ),
)
CLAUSE_BY_ID = {c.id: c for c in CLAUSES}

RESOLUTION_ORDER = ("P9", "P10", "P7", "P5", "P4", "P2", "P3", "P6", "P1", "P8")
"""Clauses are tried in this order; the first that decides wins (P8 only routes, never decides)."""

_RESOLUTION_NOTES = (
    "P9 first: nothing can be decided before the claim is known.",
    "P10 next: billing errors are verified from the payment record, for every customer.",
    "P7 before everything it overrides (P1-P4, P6); carrier-verified non-delivery (P5) is exempt.",
    "P5, P4, P2, P3 decide claims about the delivery and the item itself.",
    "P6 before P1: final-sale and hygiene items are never returned for change of mind or size.",
    "P8 never changes the decision; it adds the Escalations route to refunds above the threshold.",
)


class Verdict(BaseModel):
    """The policy's conclusion for a ticket given the facts known so far."""

    model_config = ConfigDict(frozen=True)

    gold: Decision
    alternatives: tuple[Decision, ...]  # acceptable, half credit
    harmful: tuple[Decision, ...]  # forbidden by the policy, negative reward
    clauses: tuple[str, ...]  # deciding clause first
    rationale: str
    ask_topic: str | None  # for request_info: what must be asked
    queue: Queue  # where the ticket belongs (workflow tasks)
    tag: Tag  # the tag that records the outcome
    reason: str | None  # for denials: the reason a reply must state (a key of REASONS)


# What a denial reply must convey for each reason: any one of the phrases counts.
REASONS: dict[str, tuple[str, ...]] = {
    "window": ("30 days", "30-day", "thirty days", "return window"),
    "used": ("used", "worn", "washed", "unused", "condition"),
    "final_sale": ("final sale", "final-sale", "hygiene"),
    "warranty": ("warranty",),
    "normal_wear": ("wear", "normal use", "not a defect"),
    "in_transit": ("in transit", "on its way", "on the way", "still travelling"),
    "parcel_found": ("found", "glad"),
    "not_charged_twice": ("charged once", "single charge", "one charge", "only once", "payment record"),
    "unverifiable": ("unable to approve", "cannot approve", "can't approve", "not able to approve"),
}
# Reasons whose denial reply must also state the return window.
REASONS_WITH_WINDOW = frozenset({"window", "used", "normal_wear"})


def _approve(in_stock: bool) -> tuple[Decision, tuple[Decision, ...]]:
    """Replacement when in stock (a refund is acceptable too), otherwise refund."""
    if in_stock:
        return "approve_replacement", ("approve_refund",)
    return "approve_refund", ()


def effective_issue(ticket: Ticket, revealed: frozenset[str]) -> IssueType:
    """The claim's issue as far as the agent can know it (a vague claim clears up once asked)."""
    if ticket.claim.issue == "vague" and "details" in revealed and ticket.hidden.actual_issue:
        return ticket.hidden.actual_issue
    return ticket.claim.issue


def evaluate(ticket: Ticket, revealed: frozenset[str] = frozenset()) -> Verdict:
    """Apply the policy to ``ticket`` given the hidden-fact topics already ``revealed``."""
    decision, alts, clauses, rationale, ask, reason = _decide(ticket, revealed)
    harmful = _harmful(decision, clauses, reason)
    queue, tag = _route(ticket, decision, clauses)
    if queue == "Escalations":
        clauses = (*clauses, "P8")
    return Verdict(
        gold=decision,
        alternatives=alts,
        harmful=harmful,
        clauses=clauses,
        rationale=rationale,
        ask_topic=ask,
        queue=queue,
        tag=tag,
        reason=reason,
    )


def full_information_verdict(ticket: Ticket) -> Verdict:
    """The verdict once the customer has answered every question there is."""
    return evaluate(ticket, frozenset(INFO_TOPICS))


_Decided = tuple[Decision, tuple[Decision, ...], tuple[str, ...], str, "str | None", "str | None"]


def _decide(t: Ticket, revealed: frozenset[str]) -> _Decided:  # noqa: C901 - one branch per clause, in order
    order, claim, customer, product = t.order, t.claim, t.customer, t.order.product
    issue = effective_issue(t, revealed)
    days = order.days_since_delivery
    in_window = days is not None and days <= RETURN_WINDOW_DAYS
    images = claim.images_provided or ("photos" in revealed and t.hidden.photos_show is not None)
    photos_show = "damage" if claim.images_provided else (t.hidden.photos_show if "photos" in revealed else None)

    # P9: the claim itself is unknown.
    if issue == "vague":
        return "request_info", (), ("P9",), "The message does not say what the problem is; ask for details.", "details", None

    # P10: billing, verified from the payment record for every customer.
    if issue == "duplicate_charge":
        if order.charged_twice:
            return "approve_refund", (), ("P10",), "The payment record shows the duplicate charge; refund it.", None, None
        return "reject", (), ("P10",), "The payment record shows a single charge.", None, "not_charged_twice"

    carrier_verified = issue == "not_received" and (
        order.carrier_status in ("lost", "returned")
        or (order.carrier_status == "in_transit" and order.days_past_estimate > LATE_IN_TRANSIT_DAYS)
    )
    # P7: high-risk accounts get only carrier-verifiable claims.
    if customer.high_risk and not carrier_verified:
        return "reject", (), ("P7",), "High-risk account and the claim cannot be verified from order or carrier data.", None, "unverifiable"

    # P5: not received.
    if issue == "not_received":
        if carrier_verified:
            d, a = _approve(product.in_stock)
            return d, a, ("P5",), f"Carrier reports the parcel {order.carrier_status.replace('_', ' ')}; it did not arrive.", None, None
        if order.carrier_status == "in_transit":
            return "reject", (), ("P5",), "The parcel is in transit and not yet late; it is on its way.", None, "in_transit"
        # carrier says delivered
        if "delivery" not in revealed or t.hidden.parcel_found is None:
            return "request_info", (), ("P5",), "Carrier says delivered; ask the customer to check before deciding.", "delivery", None
        if t.hidden.parcel_found:
            return "reject", (), ("P5",), "The customer found the parcel.", None, "parcel_found"
        d, a = _approve(product.in_stock)
        return d, a, ("P5",), "Carrier says delivered but the customer confirmed it is missing; treated as lost.", None, None

    # P4: wrong item.
    if issue == "wrong_item":
        if not in_window:
            return "reject", (), ("P4", "P1"), f"Wrong item reported after {RETURN_WINDOW_DAYS} days.", None, "window"
        d, a = _approve(product.in_stock)
        return d, a, ("P4",), "We shipped the wrong item.", None, None

    # P2 / P3: damaged or defective.
    if issue in ("damaged", "defective"):
        if in_window:
            if not images:
                return "request_info", (), ("P2",), "Damage or defect claimed without photos; ask for photos.", "photos", None
            if photos_show == "normal_wear":
                return "reject", (), ("P2",), "The photos show ordinary wear, not a defect.", None, "normal_wear"
            d, a = _approve(product.in_stock)
            return d, a, ("P2",), "Damage or defect on arrival, evidenced by photos.", None, None
        if issue == "damaged":
            return "reject", (), ("P2",), f"Shipping damage reported after {RETURN_WINDOW_DAYS} days.", None, "window"
        if days is not None and days <= product.warranty_days:
            d, a = _approve(product.in_stock)
            return d, a, ("P3",), "Defect inside the warranty period.", None, None
        return "reject", (), ("P3",), "Defect after the warranty period ended.", None, "warranty"

    # P6: final sale / hygiene, for change-of-mind and size returns.
    if issue in ("changed_mind", "size_issue", "item_used") and (
        product.final_sale or product.hygiene or product.perishable
    ):
        return "reject", (), ("P6",), "Final-sale or hygiene item returned for change of mind or size.", None, "final_sale"

    # P1: window and condition.
    if not in_window:
        return "reject", (), ("P1",), f"Return requested after the {RETURN_WINDOW_DAYS}-day window.", None, "window"
    used = True if issue == "item_used" else claim.item_used
    if used is None and "usage" in revealed:
        used = t.hidden.item_used
    if used is None:
        return "request_info", (), ("P1",), "Condition of the item not stated; ask whether it was used.", "usage", None
    if used:
        return "reject", (), ("P1",), "The item was used; only unused items can be returned.", None, "used"
    if issue == "size_issue":
        d, a = _approve(product.in_stock)
        return d, a, ("P1",), "Unused, inside the window: exchange for another size.", None, None
    return "approve_refund", (), ("P1",), "Unused change-of-mind return inside the window.", None, None


# Denials that protect the store: approving instead is harmful.
_PROTECTIVE_REASONS = frozenset({"unverifiable", "final_sale", "used", "window", "warranty", "normal_wear", "parcel_found", "not_charged_twice"})
# Approvals backed by verified evidence: rejecting instead is harmful.
_EVIDENCED_CLAUSES = frozenset({"P2", "P3", "P4", "P5", "P10"})


def _harmful(decision: Decision, clauses: tuple[str, ...], reason: str | None) -> tuple[Decision, ...]:
    if decision == "reject" and reason in _PROTECTIVE_REASONS:
        return ("approve_refund", "approve_replacement")
    if decision in ("approve_refund", "approve_replacement") and clauses[0] in _EVIDENCED_CLAUSES:
        return ("reject",)
    return ()


_TAG: dict[Decision, Tag] = {
    "approve_refund": "Refund",
    "approve_replacement": "Replacement",
    "reject": "Policy_Denied",
    "request_info": "Needs_Info",
}


def _route(ticket: Ticket, decision: Decision, clauses: tuple[str, ...]) -> tuple[Queue, Tag]:
    if clauses[0] == "P7":
        return "Fraud", "Fraud_Risk"
    if clauses[0] == "P10":
        return "Billing", _TAG[decision]
    if decision == "approve_refund" and ticket.order.amount > ESCALATION_THRESHOLD:
        return "Escalations", "Refund"
    return "Returns", _TAG[decision]


def render_policy_markdown() -> str:
    """The store policy document agents can look up, rendered from :data:`CLAUSES`."""
    lines = ["# Store policy", "", "Rules carry ids; cite them in your reasoning. Rules are applied in this order:", ""]
    lines.append(" → ".join(RESOLUTION_ORDER))
    lines.append("")
    lines.extend(f"- {note}" for note in _RESOLUTION_NOTES)
    lines.append("")
    for clause in CLAUSES:
        lines.append(f"## {clause.id}. {clause.title}")
        lines.append("")
        lines.append(clause.text)
        lines.append("")
    lines.append("## Replies to customers")
    lines.append("")
    lines.append(
        "Be courteous. Quote the order id. When declining, state the actual reason and, where a time "
        "limit applies, the window. Never promise a refund you are declining, never mention internal "
        "risk assessments, and never blame the customer."
    )
    lines.append("")
    return "\n".join(lines)
