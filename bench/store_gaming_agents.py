"""Cheap strategies on the store desk, each a player of the core's episodes. ``tests/env/test_store_gaming.py``
bounds what each resolves (with one more there, built on the test-only oracle: acting without verifying
identity); ``bench.gaming`` prints the table.

- ``constant plan``: verify, then refund the newest order's first line in full to its first payment;
- ``refund everything``: verify, then refund every line of every order in full;
- ``ask everything``: asks for every topic at once, then plays like the heuristic;
- ``never reads the messages``: verifies and acts on the records alone (the newest delivered order);
- ``header and records``: the subject line's keyword and the records, never the message body;
- ``refuses with every reason``: verifies, reads every order and shipment, and declines in one message
  that gives every reason there is (the message body never read beyond the email and postcode);
- ``refuses with the common reasons``: the same, giving only the four reasons gold refusals give most.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from service.env.models import Action, Observation
from service.env.store.agents import StoreHeuristicAgent
from service.env.store.customer import TOPICS

_IDENTITY = "Could you give me the email address and postcode on your account?"


class _Scripted:
    """Asks for identity, verifies it, reads the account, then plays ``plan(orders)``'s calls."""

    def __init__(self) -> None:
        self.inner = StoreHeuristicAgent()
        self.queue: list[tuple[str, dict[str, Any]]] = []
        self.planned = False

    def plan(self, obs: Observation, orders: dict[str, dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
        raise NotImplementedError

    def act(self, obs: Observation) -> Action:
        h = self.inner
        if h.stage in ("start", "verify", "checked", "records") or (h.stage == "understand" and h.queue):
            return h.act(obs)
        h._remember(obs)
        if not self.planned:
            self.planned = True
            writes = self.plan(obs, h.orders)
            self.queue = [
                ("send_message", {"text": "I'll sort this out now. Shall I go ahead?", "asking_for": ["confirmation"]}),
                *writes,
                ("send_message", {"text": "All done: the refund arrives in 5-10 business days."}),
                ("end_conversation", {}),
            ]
        name, args = self.queue.pop(0) if self.queue else ("end_conversation", {})
        return Action(tool=name, arguments=args)


def _full_refund(order: dict[str, Any], lines: list[dict[str, Any]]) -> tuple[str, dict[str, Any]]:
    amount = round(sum(ln["unit_price"] * ln["quantity"] for ln in lines), 2)
    to = next((p["payment_id"] for p in order["payments"] if p["method"] in ("card", "paypal")), "store_credit")
    return "refund", {
        "order_id": order["order_id"],
        "items": [{"line_no": ln["line_no"], "quantity": ln["quantity"]} for ln in lines],
        "amounts": [{"to": to, "amount": amount}],
    }


class ConstantPlan(_Scripted):
    def plan(self, obs: Observation, orders: dict[str, dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
        newest = max(orders.values(), key=lambda o: o["placed_on"])
        delivered = [ln for ln in newest["lines"] if ln["status"] != "processing"][:1]
        return [_full_refund(newest, delivered)] if delivered else []


class RefundEverything(_Scripted):
    def plan(self, obs: Observation, orders: dict[str, dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
        out = []
        for order in orders.values():
            lines = [ln for ln in order["lines"] if ln["status"] != "processing"]
            if lines:
                out.append(_full_refund(order, lines))
        return out


class RecordsOnly(_Scripted):
    """Never reads the message: refunds the most recently delivered line, which is what complaints are
    most often about."""

    def plan(self, obs: Observation, orders: dict[str, dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
        delivered = [(o, ln) for o in orders.values() for ln in o["lines"] if ln["status"] == "delivered"]
        if not delivered:
            return []
        order, line = max(delivered, key=lambda ol: ol[0]["placed_on"])
        return [_full_refund(order, [line])]


class HeaderAndRecords(StoreHeuristicAgent):
    """The heuristic, reading the subject line only (the message body is never looked at)."""

    def act(self, obs: Observation) -> Action:
        subject = obs.ticket.split("Subject: ", 1)[1].split("\n", 1)[0]
        header_only = obs.model_copy(update={"customer_message": subject})
        return super().act(header_only)


class AskEverything(StoreHeuristicAgent):
    """The heuristic, asking every topic there is in its first message."""

    def act(self, obs: Observation) -> Action:
        if not self.asked:
            self.asked.update(TOPICS)
            return Action(
                tool="send_message",
                arguments={
                    "text": _IDENTITY + " Also: photos? condition? did the parcel turn up? refund or replacement?",
                    "asking_for": sorted(set(TOPICS) - {"confirmation"}),
                },
            )
        return super().act(obs)


REASONS = {  # one way to say each refusal reason of the store policy
    "window": "the 30-day window for this has passed",
    "used": "the item has been used, and only unused items can be returned",
    "final_sale": "final-sale, hygiene and perishable items cannot be returned",
    "warranty": "the warranty has ended",
    "normal_wear": "the photos show normal wear and tear rather than a defect",
    "in_transit": "your parcel is still in transit and on its way to you",
    "parcel_found": "you have found the parcel",
    "not_charged_twice": "our records show you were charged only once",
    "unverifiable": "we are unable to verify the claim",
    "shipped": "it has already shipped",
    "not_late": "it was delivered no more than three days after the estimate, which is not late enough for a credit",
    "already_credited": "a goodwill credit was already given for this order",
    "not_holder": "only the account holder can make changes, so they will need to contact us themselves",
    "original_payment": "refunds can only go back to the original payment method",
    "already_settled": "that item was already refunded or replaced before",
}
COMMON = ("shipped", "window", "not_holder", "not_charged_twice")  # the most frequent gold refusals (train)


class RefusesWithReasons:
    """Verifies identity and reads every order and shipment, then declines everything in one message that
    gives ``reasons``, and ends: it reads nothing of the message but the email and postcode."""

    reasons: tuple[str, ...] = tuple(REASONS)

    def __init__(self) -> None:
        self.inner = StoreHeuristicAgent()
        self.queue: list[tuple[str, dict[str, Any]]] = []
        self.planned = False

    def act(self, obs: Observation) -> Action:
        h = self.inner
        if h.stage in ("start", "verify", "checked", "records") or (h.stage == "understand" and h.queue):
            return h.act(obs)
        h._remember(obs)
        if not self.planned:
            self.planned = True
            shipments = sorted({ln["shipment_id"] for o in h.orders.values() for ln in o["lines"] if ln["shipment_id"]})
            reasons = "; ".join(REASONS[r] for r in self.reasons)
            text = f"I'm sorry, but I can't help with this: {reasons}."
            self.queue = [("get_shipment", {"shipment_id": s}) for s in shipments]
            self.queue += [("send_message", {"text": text}), ("end_conversation", {})]
        name, args = self.queue.pop(0) if self.queue else ("end_conversation", {})
        return Action(tool=name, arguments=args)


class RefusesWithCommonReasons(RefusesWithReasons):
    reasons = COMMON


STRATEGIES: dict[str, Callable[[], object]] = {
    "constant plan": ConstantPlan,
    "refund everything": RefundEverything,
    "ask everything": AskEverything,
    "never reads the messages": RecordsOnly,
    "header and records only": HeaderAndRecords,
    "refuses with every reason": RefusesWithReasons,
    "refuses with the common reasons": RefusesWithCommonReasons,
}
