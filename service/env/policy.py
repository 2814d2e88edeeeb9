"""The executable store policy.

Each rule is a :class:`PolicyClause` (id, title, the text agents read). :func:`evaluate` applies
the rules to a ticket in the documented :data:`RESOLUTION_ORDER` and returns a :class:`Verdict`:
the gold decision, acceptable alternatives, harmful decisions, the deciding clause ids, a one-line
rationale, the reasons a denial may give, and what the workflow tasks need (queue, tag, refund
amount).

The Markdown document served to agents (``lookup: policy``) is rendered from the same clauses, so
the text an agent reads and the code that grades it cannot drift apart. Every case the generator
produces is settled by a clause (the tests check each one metamorphically).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from service.env.models import Decision, Queue, Tag
from service.env.world import HIGH_RISK_RETURNS, HYGIENE_ITEMS, INFO_TOPICS, IssueType, Ticket

RETURN_WINDOW_DAYS = 30
LATE_IN_TRANSIT_DAYS = 7
ESCALATION_THRESHOLD = 300.0

# Every reason a denial can rest on (``Verdict.reason``); the reply grader reads each in any words.
REASONS = (
    "window",
    "used",
    "final_sale",
    "warranty",
    "normal_wear",
    "in_transit",
    "parcel_found",
    "not_charged_twice",
    "unverifiable",
)

RETURN_ISSUES: frozenset[IssueType] = frozenset({"changed_mind", "size_issue", "item_used"})
ITEM_ISSUES: frozenset[IssueType] = frozenset({"damaged", "defective"})


class PolicyClause(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: str
    title: str
    text: str


def _hygiene_examples() -> str:
    return ", ".join(HYGIENE_ITEMS)


CLAUSES: tuple[PolicyClause, ...] = (
    PolicyClause(
        id="P1",
        title="Return window and condition",
        text=f"Change-of-mind and size returns are accepted within {RETURN_WINDOW_DAYS} days of delivery — day "
        f"{RETURN_WINDOW_DAYS} still counts — and only for unused items (unworn, unwashed, in original packaging). "
        "Size issues are exchanged for another size when the item is in stock, otherwise refunded; change-of-mind "
        "returns are refunded. If the item's condition is not stated, ask the customer before deciding. Used items "
        f"and requests after {RETURN_WINDOW_DAYS} days are declined.",
    ),
    PolicyClause(
        id="P2",
        title="Damaged or defective on arrival",
        text=f"Damage or a defect reported within {RETURN_WINDOW_DAYS} days of delivery is decided on photo evidence "
        "(P11): with photos that show the damage or defect, send a replacement when the item is in stock, otherwise "
        f"refund. Shipping damage reported after {RETURN_WINDOW_DAYS} days is declined (a defect reported after "
        f"{RETURN_WINDOW_DAYS} days falls under P3).",
    ),
    PolicyClause(
        id="P3",
        title="Warranty",
        text=f"A defect reported after {RETURN_WINDOW_DAYS} days is covered by the product's warranty, which runs from "
        "the delivery date for the number of days the order record shows (its last day included): decided on "
        "photo evidence (P11), replacement when in stock, otherwise refund. After the warranty has ended, decline.",
    ),
    PolicyClause(
        id="P4",
        title="Wrong item delivered",
        text=f"If we shipped the wrong item and it is reported within {RETURN_WINDOW_DAYS} days of delivery, send the "
        f"right one when in stock, otherwise refund. No photo is required. Reported after {RETURN_WINDOW_DAYS} days: "
        "decline.",
    ),
    PolicyClause(
        id="P5",
        title="Not received",
        text="Non-delivery claims have no reporting window. If the carrier reports the parcel lost, returned to "
        f"sender, or still in transit more than {LATE_IN_TRANSIT_DAYS} days past its estimate, send a replacement "
        "when in stock, otherwise refund. If it is in transit and not yet that late, decline for now: it is on its "
        "way (approving it is a harmful decision). If the carrier reports it delivered, ask the customer to check "
        "with neighbours and the delivery spot; if it is then found, decline; if not, treat it as lost.",
    ),
    PolicyClause(
        id="P6",
        title="Final sale, hygiene and perishable items",
        text="Final-sale items, hygiene items and perishables cannot be returned for change of mind or size. The "
        f"order record flags hygiene items (for example: {_hygiene_examples()}). Damage, defect and wrong-item "
        "claims still apply.",
    ),
    PolicyClause(
        id="P7",
        title="High-risk accounts",
        text=f"A customer is high-risk with {HIGH_RISK_RETURNS} or more returns in the last 12 months, any chargeback, "
        "or a fraud flag on the account. For a high-risk customer, decline every claim that cannot be verified from "
        "order or carrier data. Only a carrier-confirmed non-delivery (lost, returned to sender, or in transit more "
        f"than {LATE_IN_TRANSIT_DAYS} days late) and a billing error shown by the payment record can be verified; a "
        "carrier's 'delivered' is not proof that a parcel is missing. This overrides P1-P4, P6 and P11. Route the "
        "tickets declined under P7 to Fraud; the claims it exempts follow their own clause's route. Tell the customer "
        "the claim cannot be verified or approved; never mention the risk assessment, fraud checks, return history "
        "or chargebacks.",
    ),
    PolicyClause(
        id="P8",
        title="Escalation of large refunds",
        text=f"Refunds above ${ESCALATION_THRESHOLD:.0f} are approved by the Escalations team: reassign the ticket to "
        "Escalations and send the customer a polite holding reply instead of resolving it. The refund is what the "
        "claim concerns: the claimed item's price times its quantity, or the whole order for a parcel that never "
        "arrived — not the order total. Billing-error refunds (P10) stay with Billing at any amount.",
    ),
    PolicyClause(
        id="P9",
        title="Unclear requests",
        text="If the message does not say what the problem is, ask the customer for details before deciding.",
    ),
    PolicyClause(
        id="P10",
        title="Billing errors",
        text="A duplicate charge shown by the payment record is refunded (Billing queue, any amount). A reported "
        "duplicate charge that the payment record does not show is declined with an explanation.",
    ),
    PolicyClause(
        id="P11",
        title="Photo evidence and ordinary wear",
        text="Damage and defect claims (P2, P3) are decided on photos. Without photos, ask for them; deciding such a "
        "claim without them is a wrong decision, whatever the photos would have shown. Photos that show ordinary "
        "wear and tear from use are not damage or a defect: decline.",
    ),
    PolicyClause(
        id="P12",
        title="Records decide",
        text="Dates, charges, stock, product flags and delivery status come from the order, customer and carrier "
        "records, not from the customer's recollection. When the customer's account differs from the records, decide "
        "on the records. Days are counted from the delivery date to the day the ticket was opened.",
    ),
    PolicyClause(
        id="P13",
        title="Several claims in one message",
        text="When a message makes two claims about the same item (for example, a change of mind and damage), decide "
        "the claim whose clause comes first in the resolution order; side remarks that are not claims (a slow "
        "delivery, earlier contacts) change nothing.",
    ),
    PolicyClause(
        id="P14",
        title="Replies to customers",
        text="Be courteous and quote the order id. State the decision plainly and, when declining, the actual reason: "
        f"the {RETURN_WINDOW_DAYS}-day window when the time limit is the reason, the item's use, the final-sale, "
        "hygiene or perishable rule, the warranty's end, ordinary wear in the photos, the parcel still on its way or "
        "found, the payment record's single charge, or — for P7 — that the claim cannot be verified. Any time limit, "
        "warranty length or amount you state must be the true one. Never promise an outcome you are declining, never "
        "contradict yourself, never mention internal risk assessments, and never blame the customer. A holding reply "
        "(routing) says who will handle the ticket and promises no outcome.",
    ),
)

RESOLUTION_ORDER = ("P9", "P10", "P7", "P5", "P4", "P2", "P3", "P6", "P1", "P8")
"""Clauses are tried in this order; the first that decides wins (P8 only routes, never decides)."""

_RESOLUTION_NOTES = (
    "P9 first: nothing can be decided before the claim is known.",
    "P10 next: billing errors are verified from the payment record, for every customer.",
    "P7 before everything it overrides (P1-P4, P6, P11); carrier-confirmed non-delivery (P5) is exempt.",
    "P5, P4, P2, P3 (with P11) decide claims about the delivery and the item itself.",
    "P6 before P1: final-sale, hygiene and perishable items are never returned for change of mind or size.",
    "P8 never changes the decision; it adds the Escalations route to refunds above the threshold.",
    "P12 says which facts count, P13 which claim counts, P14 how to tell the customer.",
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
    reason: str | None  # for denials: the deciding reason
    reasons: tuple[str, ...] = ()  # for denials: every reason that alone would decline it (a reply may give any)
    issue: IssueType  # the claim that decides (P13), as far as it is known
    refund_amount: float  # what a refund of this claim pays (P8)


class _Path(BaseModel):
    """One claim's path through the rules, before routing."""

    model_config = ConfigDict(frozen=True)

    decision: Decision
    alternatives: tuple[Decision, ...] = ()
    clauses: tuple[str, ...]
    rationale: str
    ask: str | None = None
    reason: str | None = None


def _approve(in_stock: bool, clauses: tuple[str, ...], rationale: str) -> _Path:
    """Replacement when in stock (a refund is acceptable too), otherwise refund."""
    if in_stock:
        return _Path(
            decision="approve_replacement", alternatives=("approve_refund",), clauses=clauses, rationale=rationale
        )
    return _Path(decision="approve_refund", clauses=clauses, rationale=rationale)


def _reject(reason: str, clauses: tuple[str, ...], rationale: str) -> _Path:
    return _Path(decision="reject", clauses=clauses, rationale=rationale, reason=reason)


def _ask(topic: str, clauses: tuple[str, ...], rationale: str) -> _Path:
    return _Path(decision="request_info", clauses=clauses, rationale=rationale, ask=topic)


def effective_issue(ticket: Ticket, revealed: frozenset[str]) -> IssueType:
    """The claim's issue as far as the agent can know it (a vague claim clears up once asked)."""
    if ticket.claim.issue == "vague" and "details" in revealed and ticket.hidden.actual_issue:
        return ticket.hidden.actual_issue
    return ticket.claim.issue


def carrier_confirms_loss(ticket: Ticket) -> bool:
    o = ticket.order
    return o.carrier_status in ("lost", "returned") or (
        o.carrier_status == "in_transit" and o.days_past_estimate > LATE_IN_TRANSIT_DAYS
    )


def _path(t: Ticket, issue: IssueType, revealed: frozenset[str], *, risk_rule: bool = True) -> _Path:
    """The clauses in resolution order: the first that applies decides the claim ``issue``."""
    if issue == "vague":  # P9
        return _ask("details", ("P9",), "The message does not say what the problem is; ask for details.")
    if issue == "duplicate_charge":  # P10, for every customer
        return _duplicate_charge_path(t)
    verified = issue == "not_received" and carrier_confirms_loss(t)
    if risk_rule and t.customer.high_risk and not verified:  # P7
        return _reject(
            "unverifiable", ("P7",), "High-risk account and the claim cannot be verified from order or carrier data."
        )
    if issue == "not_received":  # P5
        return _not_received_path(t, revealed, verified)
    days = t.order.days_since_delivery
    in_window = days is not None and days <= RETURN_WINDOW_DAYS
    if issue == "wrong_item":  # P4
        if not in_window:
            return _reject("window", ("P4",), f"Wrong item reported after {RETURN_WINDOW_DAYS} days.")
        return _approve(t.product.in_stock, ("P4",), "We shipped the wrong item.")
    if issue in ITEM_ISSUES:  # P2 / P3, decided on evidence (P11)
        return _item_path(t, issue, revealed, in_window)
    return _return_path(t, issue, revealed, in_window)


def _duplicate_charge_path(t: Ticket) -> _Path:  # P10
    if t.order.charges > 1:
        return _Path(
            decision="approve_refund",
            clauses=("P10",),
            rationale="The payment record shows the duplicate charge; refund it.",
        )
    return _reject("not_charged_twice", ("P10",), "The payment record shows a single charge.")


def _not_received_path(t: Ticket, revealed: frozenset[str], verified: bool) -> _Path:  # P5
    order, product = t.order, t.product
    if verified:
        return _approve(
            product.in_stock,
            ("P5",),
            f"The carrier reports the parcel {order.carrier_status.replace('_', ' ')}"
            + (" and far past its estimate." if order.carrier_status == "in_transit" else "."),
        )
    if order.carrier_status == "in_transit":
        return _reject("in_transit", ("P5",), "The parcel is in transit and not yet late; it is on its way.")
    if "delivery" not in revealed or t.hidden.parcel_found is None:
        return _ask("delivery", ("P5",), "The carrier says delivered; ask the customer to check before deciding.")
    if t.hidden.parcel_found:
        return _reject("parcel_found", ("P5",), "The customer found the parcel.")
    return _approve(
        product.in_stock,
        ("P5",),
        "The carrier says delivered but the customer confirmed it is missing; treated as lost.",
    )


def _item_path(t: Ticket, issue: IssueType, revealed: frozenset[str], in_window: bool) -> _Path:  # P2 / P3, P11
    days, product = t.order.days_since_delivery, t.product
    if not in_window and issue == "damaged":
        return _reject("window", ("P2",), f"Shipping damage reported after {RETURN_WINDOW_DAYS} days.")
    clause = "P2" if in_window else "P3"
    if clause == "P3" and (days is None or days > product.warranty_days):
        return _reject("warranty", ("P3",), "Defect reported after the warranty period ended.")
    photos = "damage" if t.claim.images_provided else (t.hidden.photos_show if "photos" in revealed else None)
    if photos is None:
        return _ask("photos", (clause, "P11"), "Damage or defect claimed without photos; ask for photos.")
    if photos == "normal_wear":
        return _reject("normal_wear", (clause, "P11"), "The photos show ordinary wear, not damage or a defect.")
    what = "Damage or defect on arrival" if clause == "P2" else "A defect inside the warranty period"
    return _approve(product.in_stock, (clause, "P11"), f"{what}, evidenced by photos.")


def _return_path(t: Ticket, issue: IssueType, revealed: frozenset[str], in_window: bool) -> _Path:  # P6, P1
    product = t.product
    if product.final_sale or product.hygiene or product.perishable:  # P6, returns only
        return _reject(
            "final_sale", ("P6",), "Final-sale, hygiene or perishable item returned for change of mind or size."
        )
    if not in_window:  # P1
        return _reject("window", ("P1",), f"Return requested after the {RETURN_WINDOW_DAYS}-day window.")
    used = True if issue == "item_used" else t.claim.item_used
    if used is None and "usage" in revealed:
        used = t.hidden.item_used
    if used is None:
        return _ask("usage", ("P1",), "Condition of the item not stated; ask whether it was used.")
    if used:
        return _reject("used", ("P1",), "The item was used; only unused items can be returned.")
    if issue == "size_issue":
        return _approve(product.in_stock, ("P1",), "Unused, inside the window: exchange for another size.")
    return _Path(
        decision="approve_refund", clauses=("P1",), rationale="Unused change-of-mind return inside the window."
    )


def _deciding_path(t: Ticket, revealed: frozenset[str], *, risk_rule: bool = True) -> tuple[IssueType, _Path]:
    """P13: of the message's claims, the one whose clause comes first in the resolution order decides."""
    issues = [effective_issue(t, revealed)]
    if t.claim.second_issue is not None and issues[0] != "vague":
        issues.append(t.claim.second_issue)
    paths = [(issue, _path(t, issue, revealed, risk_rule=risk_rule)) for issue in issues]
    return min(paths, key=lambda p: RESOLUTION_ORDER.index(p[1].clauses[0]))


def _other_reasons(t: Ticket, issue: IssueType, path: _Path, revealed: frozenset[str]) -> tuple[str, ...]:
    """Reasons besides the deciding one that would decline the claim on their own (a reply may give any)."""
    reasons: list[str] = []
    if path.reason == "unverifiable":  # what the claim would get without P7, if that is a denial
        _, plain = _deciding_path(t, revealed, risk_rule=False)
        if plain.reason is not None:
            reasons += [plain.reason, *_other_reasons(t, issue, plain, revealed)]
    elif path.reason in ("final_sale", "window") and path.clauses[0] in (
        "P6",
        "P1",
    ):  # P6 or P1's window decided; P1 may decline too
        days = t.order.days_since_delivery
        if days is not None and days > RETURN_WINDOW_DAYS:
            reasons.append("window")
        used = True if issue == "item_used" else t.claim.item_used
        if used is None and "usage" in revealed:
            used = t.hidden.item_used
        if used:
            reasons.append("used")
    return tuple(dict.fromkeys(r for r in reasons if r != path.reason))


def refund_amount(t: Ticket, issue: IssueType) -> float:
    """P8: what a refund of this claim pays: the claimed item, or the whole order for a missing parcel or a
    duplicate charge."""
    return t.order.amount if issue in ("not_received", "duplicate_charge") else t.line.amount


def evaluate(ticket: Ticket, revealed: frozenset[str] = frozenset()) -> Verdict:
    """Apply the policy to ``ticket`` given the hidden-fact topics already ``revealed``."""
    issue, path = _deciding_path(ticket, revealed)
    amount = refund_amount(ticket, issue)
    queue, tag = _route(path.decision, path.clauses, amount)
    clauses = (*path.clauses, "P8") if queue == "Escalations" else path.clauses
    reasons = (path.reason, *_other_reasons(ticket, issue, path, revealed)) if path.reason else ()
    return Verdict(
        gold=path.decision,
        alternatives=path.alternatives,
        harmful=_harmful(path),
        clauses=clauses,
        rationale=path.rationale,
        ask_topic=path.ask,
        queue=queue,
        tag=tag,
        reason=path.reason,
        reasons=reasons,
        issue=issue,
        refund_amount=amount,
    )


def full_information_verdict(ticket: Ticket) -> Verdict:
    """The verdict once the customer has answered every question there is."""
    return evaluate(ticket, frozenset(INFO_TOPICS))


# Approvals backed by verified evidence: rejecting instead is harmful. Every denial protects the store:
# approving instead is harmful (an in-transit parcel included).
_EVIDENCED_CLAUSES = frozenset({"P2", "P3", "P4", "P5", "P10"})


def _harmful(path: _Path) -> tuple[Decision, ...]:
    if path.decision == "reject":
        return ("approve_refund", "approve_replacement")
    if path.decision in ("approve_refund", "approve_replacement") and path.clauses[0] in _EVIDENCED_CLAUSES:
        return ("reject",)
    return ()


# The outcome tag that records each decision (P7's claims are tagged Fraud_Risk instead: see _route).
OUTCOME_TAG: dict[Decision, Tag] = {
    "approve_refund": "Refund",
    "approve_replacement": "Replacement",
    "reject": "Policy_Denied",
    "request_info": "Needs_Info",
}


def _route(decision: Decision, clauses: tuple[str, ...], amount: float) -> tuple[Queue, Tag]:
    if clauses[0] == "P7":
        return "Fraud", "Fraud_Risk"
    if clauses[0] == "P10":
        return "Billing", OUTCOME_TAG[decision]
    if decision == "approve_refund" and amount > ESCALATION_THRESHOLD:
        return "Escalations", "Refund"
    return "Returns", OUTCOME_TAG[decision]


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
    return "\n".join(lines)
