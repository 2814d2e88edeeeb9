"""Test-only players of the store desk: the gold oracle, which plays the policy's gold effects with the
whole procedure (identity, reads, questions, confirmation, telling, ending). It proves that every
generated conversation can be resolved and that the backend accepts every gold write."""

from __future__ import annotations

from typing import Any

from service.env import Dataset
from service.env.models import Action, Observation
from service.env.store import ledger as L
from service.env.store.policy import Fact, Gold, decide
from service.env.store.world import StoreTicket

REASON_TEXT = {
    "window": "this is outside our 30-day return window",
    "used": "the item has been used, and only unused items can be returned",
    "final_sale": "final-sale, hygiene and perishable items cannot be returned",
    "warranty": "the warranty on it has ended",
    "normal_wear": "the photos show ordinary wear and tear rather than a defect, so we can't accept the claim",
    "in_transit": "your parcel is still in transit and on its way to you, so we can't refund it yet",
    "parcel_found": "you have found the parcel, so there is nothing to refund",
    "not_charged_twice": "the payment record shows the order was charged once, so there is no duplicate to refund",
    "unverifiable": "we are unable to verify the claim, so we cannot approve it",
    "shipped": "it has already shipped and is on its way",
    "not_late": "the tracking shows it arrived only two days after the estimate, which is not late enough for a credit",
    "already_credited": "a goodwill credit was already given for this order",
    "not_holder": "only the account holder can make changes, so they will need to contact us themselves",
    "original_payment": "refunds can only go back to the original payment method",
}
TIMELINE_TEXT = {
    "card": "It will reach your card in 5-10 business days.",
    "paypal": "It will reach your PayPal account in 3-5 business days.",
}


def fact_sentence(f: Fact) -> str:
    if f.kind == "amount":
        return f"The amount is ${int(f.value) / 100:.2f}."
    if f.kind == "timeline":
        return TIMELINE_TEXT[f.value]
    if f.kind == "reason":
        return "Unfortunately " + REASON_TEXT[f.value] + "."
    if f.kind == "holding":
        return f"I have passed this to our {f.value} team, who will be in touch."
    if f.kind == "replacement":
        return "A replacement is on its way."
    return f"The new one ({f.value}) is on its way."


def tell_text(gold: Gold) -> str:
    return "Thank you for your patience. " + " ".join(fact_sentence(f) for o in gold.outcomes for f in o.tell)


def write_call(effect: object, customer_id: str) -> tuple[str, dict[str, Any]]:
    """The tool call that makes ``effect``."""
    if isinstance(effect, L.RefundEffect):
        return "refund", {
            "order_id": effect.order_id,
            "items": [{"line_no": n, "quantity": q} for n, q in effect.lines],
            "include_shipping": effect.shipping,
            "amounts": [{"to": d, "amount": c / 100} for d, c in effect.amounts],
        }
    if isinstance(effect, L.ReplaceEffect):
        return "replace_item", {"order_id": effect.order_id, "line_no": effect.line_no, "quantity": effect.quantity}
    if isinstance(effect, L.ExchangeEffect):
        args = {
            "order_id": effect.order_id,
            "line_no": effect.line_no,
            "new_sku": effect.new_sku,
            "quantity": effect.quantity,
        }
        return "exchange_item", {**args, **({"payment_id": effect.settle_to} if effect.settle_to else {})}
    if isinstance(effect, L.ReturnEffect):
        return "open_return", {
            "order_id": effect.order_id,
            "label": effect.label,
            "items": [{"line_no": n, "quantity": q} for n, q in effect.lines],
        }
    if isinstance(effect, L.CancelEffect):
        return "cancel_items", {"order_id": effect.order_id, "line_nos": list(effect.line_nos)}
    if isinstance(effect, L.AddressEffect):
        return "change_address", {
            "order_id": effect.order_id,
            "line1": effect.line1,
            "city": effect.city,
            "postal_code": effect.postal_code,
        }
    if isinstance(effect, L.CreditEffect):
        return "issue_store_credit", {
            "customer_id": customer_id,
            "order_id": effect.order_id,
            "amount": effect.amount / 100,
            "reason": effect.reason,
        }
    assert isinstance(effect, L.EscalateEffect)
    return "escalate", {"queue": effect.queue, "note": effect.note, "order_id": effect.order_id}


def gold_plan(t: StoreTicket) -> list[tuple[str, dict[str, Any]]]:
    """Every call of a perfect conversation, from the gold (the customer's replies are predictable)."""
    gold, account = decide(t), t.db.account
    calls: list[tuple[str, dict[str, Any]]] = []
    if not t.writer.gave_identity:
        calls.append(
            (
                "send_message",
                {
                    "text": "Could you give me the email address and postcode on the account?",
                    "asking_for": ["identity"],
                },
            )
        )
        if t.hidden.wrong_postcode_first:
            calls.append(
                (
                    "send_message",
                    {"text": "That postcode does not match: could you check it?", "asking_for": ["identity"]},
                )
            )
    calls.append(("find_customer", {"email": account.email}))
    calls.append(
        (
            "verify_identity",
            {
                "customer_id": account.customer_id,
                "email": account.email,
                "postal_code": account.addresses[0].postal_code,
            },
        )
    )
    tool = {
        "order": ("get_order", "order_id"),
        "shipment": ("get_shipment", "shipment_id"),
        "product": ("get_product", "product_id"),
    }
    for o in gold.outcomes:
        for kind, key in o.reads:
            calls.append((tool[kind][0], {tool[kind][1]: key}))
    if gold.needs:
        calls.append(("send_message", {"text": "A few questions before I decide.", "asking_for": sorted(gold.needs)}))
    changes = [e for e in gold.effects if not isinstance(e, L.EscalateEffect)]
    if t.writer.holder and changes:
        calls.append(
            ("send_message", {"text": "Here is what I will do. Shall I go ahead?", "asking_for": ["confirmation"]})
        )
        if any(r.mind_change for r in t.requests):
            calls.append(
                (
                    "send_message",
                    {"text": "Understood. Shall I go ahead with that instead?", "asking_for": ["confirmation"]},
                )
            )
    calls += [write_call(e, account.customer_id) for e in gold.effects]
    calls.append(("send_message", {"text": tell_text(gold)}))
    calls.append(("end_conversation", {}))
    return calls


class GoldOracle:
    """Plays :func:`gold_plan` (reads the gold: for tests only)."""

    def __init__(self, ticket_id: str, dataset: Dataset) -> None:
        self.plan = gold_plan(dataset.store_ticket(ticket_id))

    def act(self, obs: Observation) -> Action:
        name, args = self.plan.pop(0) if self.plan else ("end_conversation", {})
        return Action(tool=name, arguments=args)
