"""Reference agents for the store desk: random tool calls (a floor) and an honest heuristic.

The heuristic is what a quick script written from the public tool list and policy would do: it asks for
identity and verifies it, reads the customer, every order and the shipments it needs, finds each request
by keywords and the item by its name's words, and applies the policy's headline rules — the 30-day
windows, photos for damage, a parcel check, final-sale flags, high-risk accounts to Fraud, refunds over
$300 to Escalations, the shipping fee back when the store is at fault, prepaid returns for faulty items
over $50, gold members' free returns, a 10 % credit for late parcels. It asks for a yes before changing
anything, refunds to the order's card, tells the amount and ends. It does not pro-rate discounts, charge
restocking fees, refund part of a line's units, split a refund between a card and store credit, notice a
customer who changes their mind or writes for someone else, or check the late credit's base and limits.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from service.env.generator import stable_seed
from service.env.models import Action, Observation
from service.env.policy import ESCALATION_THRESHOLD, RETURN_WINDOW_DAYS
from service.env.store.clauses import TIMELINES
from service.env.store.tools import TOOLS
from service.env.world import high_risk

_CARD_DAYS = "{}-{}".format(*TIMELINES["card"])  # P32: how long a card refund takes, as it tells the customer
_EMAIL = re.compile(r"[\w.+-]+@[\w-]+\.[\w.]+")
_POSTCODE = re.compile(r"\b[A-Z]{1,2}\d{1,2}\s?\d[A-Z]{2}\b")
_ORDER = re.compile(r"\bord-?\s?(\d{5})\b", re.I)
_KINDS = (
    ("duplicate_charge", ("charged twice", "two payments", "double", "twice")),
    ("cancel", ("cancel",)),
    ("address", ("address", "send it to", "go to")),
    ("late", ("late", "delay", "after it was due", "behind schedule")),
    (
        "missing",
        (
            "never arrived",
            "hasn't arrived",
            "not arrived",
            "still waiting",
            "missing",
            "never came",
            "nowhere to be seen",
            "hasn't turned up",
            "hasn't shown up",
        ),
    ),
    ("wrong_item", ("wrong", "instead of", "not what i ordered")),
    ("damaged", ("damaged", "broken", "cracked", "smashed", "dented", "scratched", "torn", "in pieces")),
    ("defective", ("stopped working", "won't turn on", "faulty", "doesn't work", "fault", "cutting out", "died")),
    ("exchange", ("fit", "too small", "too big", "swap", "exchange", "size")),
    ("change_of_mind", ("return", "send it back", "send back", "changed my mind", "don't want", "don't need")),
)
_STOP = frozenset({"the", "a", "and", "of", "set", "pack", "box", "collection", "with"})


def describe_plan(calls: list[tuple[str, dict[str, Any]]]) -> str:
    """Planned write calls in words, for the message that asks the customer's yes to them (P17)."""
    parts = []
    for tool, a in calls:
        order = a.get("order_id", "")
        lines = (
            [a["line_no"]] if "line_no" in a else [*a.get("line_nos", [])] + [i["line_no"] for i in a.get("items", [])]
        )
        on = f"line {', '.join(map(str, lines))} of {order}" if lines else order
        if tool == "refund":
            total = sum(float(p["amount"]) for p in a["amounts"])
            parts.append(f"refund ${total:.2f} for {on}")
        elif tool == "issue_store_credit":
            parts.append(f"add ${float(a['amount']):.2f} in store credit for {order}")
        elif tool == "replace_item":
            parts.append(f"send a replacement for {on}")
        elif tool == "exchange_item":
            parts.append(f"exchange {on} for {a['new_sku']}")
        elif tool == "open_return":
            parts.append(f"open a return for {on}")
        elif tool == "cancel_items":
            parts.append(f"cancel {on}")
        elif tool == "change_address":
            parts.append(f"send {order} to {a['line1']}, {a['city']} {a['postal_code']}")
    return "; ".join(parts) or "nothing needs changing"


def _kind(paragraph: str) -> str | None:
    low = paragraph.lower()
    for kind, words in _KINDS:
        if any(re.search(rf"\b{re.escape(w)}\b", low) for w in words):
            return kind
    return None


@dataclass
class _Request:
    kind: str
    text: str
    order_id: str | None = None
    line: dict[str, Any] | None = None


@dataclass
class StoreHeuristicAgent:
    seed: int = 0
    queue: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    email: str | None = None
    postal: str | None = None
    customer_id: str | None = None
    verified: bool = False
    verify_tries: int = 0
    orders: dict[str, dict[str, Any]] = field(default_factory=dict)
    shipments: dict[str, dict[str, Any]] = field(default_factory=dict)
    products: dict[str, dict[str, Any]] = field(default_factory=dict)
    stage: str = "start"
    requests: list[_Request] = field(default_factory=list)
    told: list[str] = field(default_factory=list)
    asked: set[str] = field(default_factory=set)
    account: dict[str, Any] = field(default_factory=dict)
    today: str = ""

    def act(self, obs: Observation) -> Action:
        self._remember(obs)
        if self.queue:
            name, args = self.queue.pop(0)
            return Action(tool=name, arguments=args)
        handler = getattr(self, f"_{self.stage}")
        return handler(obs)

    def _remember(self, obs: Observation) -> None:
        result = obs.tool_result if isinstance(obs.tool_result, dict) else {}
        tool, out = result.get("tool"), result.get("result") or {}
        if tool == "find_customer" and result.get("ok"):
            self.customer_id = out["customer_id"]
        elif tool == "verify_identity" and result.get("ok"):
            self.verified = bool(out.get("verified"))
        elif tool == "get_customer" and result.get("ok"):
            self.account = out
        elif tool == "get_order" and result.get("ok"):
            self.orders[out["order_id"]] = out
        elif tool == "get_shipment" and result.get("ok"):
            self.shipments[out["shipment_id"]] = out
        elif tool == "get_product" and result.get("ok"):
            self.products[out["product_id"]] = out

    def _said(self, obs: Observation) -> str:
        return " ".join(e.text for e in obs.history if e.role == "customer")

    def _ask(self, text: str, *topics: str) -> Action:
        self.asked.update(topics)
        return Action(tool="send_message", arguments={"text": text, "asking_for": list(topics)})

    # ---------------------------------------------------------------- identity and records

    def _start(self, obs: Observation) -> Action:
        said = self._said(obs)
        emails, codes = _EMAIL.findall(said), _POSTCODE.findall(said)
        if emails and codes:
            self.email, self.postal = emails[-1], codes[-1]
            self.stage = "verify"
            return Action(tool="find_customer", arguments={"email": self.email})
        if self.verify_tries > 1:
            return Action(tool="end_conversation", arguments={})
        self.verify_tries += 1
        return self._ask("Could you confirm the email address and postcode on your account, please?", "identity")

    def _verify(self, obs: Observation) -> Action:
        if self.customer_id is None:
            self.stage = "start"
            self.verify_tries += 1
            return self._ask("I couldn't find that email. Could you check it, and your postcode?", "identity")
        if not self.verified and self.verify_tries <= 2 and self.stage == "verify":
            self.stage = "checked"
            return Action(
                tool="verify_identity",
                arguments={"customer_id": self.customer_id, "email": self.email, "postal_code": self.postal},
            )
        return self._start(obs)

    def _checked(self, obs: Observation) -> Action:
        if not self.verified:
            self.stage = "start"
            self.email = self.postal = None
            return self._ask("Those details don't match our records. Could you check your postcode?", "identity")
        self.stage = "records"
        return Action(tool="get_customer", arguments={"customer_id": self.customer_id})

    def _records(self, obs: Observation) -> Action:
        result = obs.tool_result if isinstance(obs.tool_result, dict) else {}
        if result.get("tool") == "get_customer":
            ids = [o["order_id"] for o in result["result"]["orders"]]
            self.queue = [("get_order", {"order_id": i}) for i in ids[1:]]
            self.stage = "understand"
            return Action(tool="get_order", arguments={"order_id": ids[0]})
        return Action(tool="get_customer", arguments={"customer_id": self.customer_id})

    # ---------------------------------------------------------------- understanding

    def _understand(self, obs: Observation) -> Action:
        self.today = obs.ticket.split("received ", 1)[1][:10]
        message = obs.customer_message
        for paragraph in [p for p in message.split("\n\n") if p.strip()]:
            kind = _kind(paragraph)
            if kind is None:
                continue
            request = _Request(kind, paragraph)
            ids = {f"ORD-{d}" for d in _ORDER.findall(paragraph)}
            request.order_id, request.line = self._find_line(paragraph, ids)
            self.requests.append(request)
        self.stage = "gather"
        return self._gather(obs)

    def _find_line(self, text: str, ids: set[str]) -> tuple[str | None, dict[str, Any] | None]:
        low = text.lower()
        best: tuple[int, str | None, dict[str, Any] | None] = (0, None, None)
        for order_id, order in self.orders.items():
            if ids and order_id not in ids:
                continue
            for line in order["lines"]:
                words = [w for w in re.findall(r"[a-z]+", line["name"].lower()) if w not in _STOP and len(w) > 2]
                score = sum(1 for w in words if re.search(rf"\b{w}", low))
                if score > best[0]:
                    best = (score, order_id, line)
        if best[1] is None and ids:
            first = sorted(ids)[0]
            named = self.orders.get(first)
            return first, (named["lines"][0] if named else None)
        return best[1], best[2]

    def _gather(self, obs: Observation) -> Action:
        """Look up shipments and products, and ask what the keyword rules need."""
        for r in self.requests:
            if r.line is None:
                continue
            sid = r.line.get("shipment_id")
            if sid and sid not in self.shipments:
                return Action(tool="get_shipment", arguments={"shipment_id": sid})
            if r.kind == "exchange" and r.line["product_id"] not in self.products:
                return Action(tool="get_product", arguments={"product_id": r.line["product_id"]})
        attachments = "attachments: none" not in obs.ticket.lower()
        for r in self.requests:
            if r.kind in ("damaged", "defective") and not attachments and "photos" not in self.asked:
                return self._ask("Could you send me a photo of the problem?", "photos")
            if r.kind == "missing" and r.line and "delivery" not in self.asked:
                ship = self.shipments.get(r.line.get("shipment_id") or "")
                if ship and ship["status"] == "delivered":
                    return self._ask("Could you check with your neighbours whether the parcel turned up?", "delivery")
            if (
                r.kind == "change_of_mind"
                and "condition" not in self.asked
                and not re.search(r"\b(sealed|unopened|used|worn|opened)\b", r.text.lower())
            ):
                return self._ask("Has the item been used or opened?", "condition")
        self.stage = "decide"
        return self._decide(obs)

    # ---------------------------------------------------------------- deciding

    def _decide(self, obs: Observation) -> Action:
        said = self._said(obs).lower()
        writes: list[tuple[str, dict[str, Any]]] = []
        for r in self.requests:
            writes += self._writes(r, said, obs)
        self.stage = "write"
        if not writes:
            self.stage = "tell"
            return self._tell(obs)
        self.queue = writes
        return self._ask(f"Here is what I'll do for you: {describe_plan(writes)}. Shall I go ahead?", "confirmation")

    def _write(self, obs: Observation) -> Action:
        self.stage = "tell"
        return self._tell(obs)

    def _payment(self, order: dict[str, Any]) -> str:
        for p in order["payments"]:
            if p["method"] in ("card", "paypal"):
                return str(p["payment_id"])
        return "store_credit"

    def _days(self, line: dict[str, Any]) -> int | None:
        ship = self.shipments.get(line.get("shipment_id") or "", {})
        delivered = next((e["date"] for e in ship.get("events", []) if e["status"] == "delivered"), None)
        return (date.fromisoformat(self.today) - date.fromisoformat(delivered)).days if delivered else None

    def _risky(self) -> bool:
        risk = self.account.get("risk", {})
        returns = risk.get("returns_last_12_months", 0)
        return high_risk(returns, risk.get("chargebacks", 0), bool(risk.get("flags")))

    def _refund(self, r: _Request, *, shipping: bool) -> list[tuple[str, dict[str, Any]]]:
        """A refund of the whole line at its list price (plus the shipping fee), or an escalation over $300."""
        assert r.line is not None and r.order_id is not None
        order, line = self.orders[r.order_id], r.line
        fee = order["shipping_fee"] if shipping else 0
        amount = round(line["unit_price"] * line["quantity"] + fee, 2)
        if amount > ESCALATION_THRESHOLD:
            self.told.append("I've passed this to our Escalations team, who will be in touch.")
            note = f"{r.order_id} refund ${amount:.2f}"
            return [("escalate", {"queue": "Escalations", "order_id": r.order_id, "note": note})]
        self.told.append(f"I've refunded ${amount:.2f}; it arrives in {_CARD_DAYS} business days.")
        items = [{"line_no": line["line_no"], "quantity": line["quantity"]}]
        args = {
            "order_id": r.order_id,
            "items": items,
            "include_shipping": bool(fee),
            "amounts": [{"to": self._payment(order), "amount": amount}],
        }
        return [("refund", args)]

    def _writes(self, r: _Request, said: str, obs: Observation) -> list[tuple[str, dict[str, Any]]]:
        if r.line is None or r.order_id is None:
            self.told.append("I'm sorry, I couldn't find that item on your account.")
            return []
        if r.kind in ("damaged", "defective", "wrong_item", "change_of_mind", "exchange") and self._risky():
            self.told.append("Unfortunately we are unable to verify this claim, so we can't approve it.")
            return [("escalate", {"queue": "Fraud", "order_id": r.order_id, "note": r.order_id})]
        if r.kind in ("damaged", "defective", "wrong_item"):
            return self._faulty(r, said)
        if r.kind == "missing":
            ship = self.shipments.get(r.line.get("shipment_id") or "", {})
            if ship.get("status") == "in_transit":
                self.told.append("Your parcel is still on its way, so there is nothing to refund yet.")
                return []
            if re.search(r"\b(found|turned up|had it)\b", said):
                self.told.append("I'm glad the parcel turned up, so there is nothing to refund.")
                return []
            return self._remedy(r, shipping=True, send_back=False)
        if r.kind in ("change_of_mind", "exchange"):
            return self._return_writes(r, said)
        return self._other_writes(r, self.orders[r.order_id], r.line, said)

    def _faulty(self, r: _Request, said: str) -> list[tuple[str, dict[str, Any]]]:
        assert r.line is not None
        days = self._days(r.line)
        warranty = r.kind == "defective" and days is not None and days <= r.line["warranty_days"]
        if days is not None and days > RETURN_WINDOW_DAYS and not warranty:
            self.told.append(
                f"Unfortunately this is outside our {RETURN_WINDOW_DAYS}-day window, so I can't approve it."
            )
            return []
        if re.search(r"\b(wear|worn|scuff)", said):
            self.told.append("Unfortunately the photos show ordinary wear, so I can't approve this.")
            return []
        return self._remedy(r, shipping=days is not None and days <= RETURN_WINDOW_DAYS, send_back=True)

    def _remedy(self, r: _Request, *, shipping: bool, send_back: bool) -> list[tuple[str, dict[str, Any]]]:
        """A replacement when one is asked for and in stock, else a refund; faulty items over $50 come back."""
        assert r.line is not None and r.order_id is not None
        line = r.line
        units = [{"line_no": line["line_no"], "quantity": line["quantity"]}]
        back = []
        if send_back and line["unit_price"] * line["quantity"] > 50:
            back = [("open_return", {"order_id": r.order_id, "label": "prepaid", "items": units})]
        if re.search(r"\b(replacement|new one|another one|replace)\b", r.text.lower()) and line["in_stock"]:
            self.told.append("A replacement is on its way.")
            replace = {"order_id": r.order_id, "line_no": line["line_no"], "quantity": line["quantity"]}
            return [("replace_item", replace), *back]
        refund = self._refund(r, shipping=shipping)
        return refund + (back if refund[0][0] == "refund" else [])

    def _return_writes(self, r: _Request, said: str) -> list[tuple[str, dict[str, Any]]]:
        line = r.line
        assert line is not None and r.order_id is not None
        if line["final_sale"] or line["hygiene"] or line["perishable"]:
            self.told.append("Unfortunately final-sale and hygiene items can't be returned.")
            return []
        days = self._days(line)
        if days is not None and days > RETURN_WINDOW_DAYS:
            self.told.append(f"Unfortunately this is outside our {RETURN_WINDOW_DAYS}-day return window.")
            return []
        if re.search(r"\b(used|worn)\b", r.text.lower() + " " + said) and "unused" not in said:
            self.told.append("Unfortunately the item has been used, so it can't be returned.")
            return []
        if r.kind == "exchange":
            exchange = self._exchange(r)
            if exchange:
                return exchange
        label = "prepaid" if self.account.get("tier") == "gold" else "customer_paid"
        refund = self._refund(r, shipping=False)
        if refund[0][0] != "refund":
            return refund
        units = [{"line_no": line["line_no"], "quantity": line["quantity"]}]
        return [("open_return", {"order_id": r.order_id, "label": label, "items": units}), *refund]

    def _exchange(self, r: _Request) -> list[tuple[str, dict[str, Any]]]:
        line = r.line
        assert line is not None and r.order_id is not None
        product = self.products.get(line["product_id"], {})
        for v in product.get("variants", []):
            size = v["options"].split(" · ")[0]
            if v["sku"] != line["sku"] and v["in_stock"] and size and size.lower() in r.text.lower():
                self.told.append(f"Your exchange for {v['options']} is on its way.")
                args = {
                    "order_id": r.order_id,
                    "line_no": line["line_no"],
                    "new_sku": v["sku"],
                    "quantity": line["quantity"],
                    "payment_id": self._payment(self.orders[r.order_id]),
                }
                return [("exchange_item", args)]
        return []

    def _other_writes(
        self, r: _Request, order: dict[str, Any], line: dict[str, Any], said: str
    ) -> list[tuple[str, dict[str, Any]]]:
        assert r.order_id is not None
        if r.kind == "cancel":
            if line["status"] != "processing":
                self.told.append("That item has already shipped, so it can't be cancelled.")
                return []
            self.told.append("I've cancelled it and refunded what you paid.")
            return [("cancel_items", {"order_id": r.order_id, "line_nos": [line["line_no"]]})]
        if r.kind == "address":
            found = re.search(r"(\d+ [A-Z][a-z]+ [A-Z][a-z]+),? ([A-Z][a-z]+) ([A-Z]{1,2}\d{1,2} ?\d[A-Z]{2})", r.text)
            if found is None or any(ln["status"] != "processing" for ln in order["lines"]):
                self.told.append("I'm afraid the order has already shipped, so the address can't change.")
                return []
            self.told.append("I've updated the delivery address.")
            return [
                (
                    "change_address",
                    {
                        "order_id": r.order_id,
                        "line1": found.group(1),
                        "city": found.group(2),
                        "postal_code": found.group(3),
                    },
                )
            ]
        if r.kind == "late":
            ship = self.shipments.get(line.get("shipment_id") or "", {})
            delivered = next((e["date"] for e in ship.get("events", []) if e["status"] == "delivered"), None)
            if (
                delivered is None
                or (date.fromisoformat(delivered) - date.fromisoformat(ship["estimated_delivery"])).days <= 3
            ):
                self.told.append("The tracking shows it arrived on time, so I can't offer a credit.")
                return []
            credit = min(25.0, max(5.0, round(order["total"] * 0.1, 2)))
            self.told.append(f"I've added ${credit:.2f} of store credit to your account.")
            return [
                (
                    "issue_store_credit",
                    {
                        "customer_id": self.customer_id,
                        "order_id": r.order_id,
                        "amount": credit,
                        "reason": "late_delivery",
                    },
                )
            ]
        # duplicate charge
        amounts = [p["amount"] for p in order["payments"]]
        dup = next((p for i, p in enumerate(order["payments"]) if p["amount"] in amounts[:i]), None)
        if dup is None:
            self.told.append("Our records show you were charged only once.")
            return []
        self.told.append(f"I've refunded the duplicate ${dup['amount']:.2f}; it arrives in {_CARD_DAYS} business days.")
        return [("refund", {"order_id": r.order_id, "amounts": [{"to": dup["payment_id"], "amount": dup["amount"]}]})]

    def _tell(self, obs: Observation) -> Action:
        self.stage = "end"
        text = "Thank you for your patience. " + " ".join(self.told or ["I've looked into this for you."])
        return Action(tool="send_message", arguments={"text": text})

    def _end(self, obs: Observation) -> Action:
        return Action(tool="end_conversation", arguments={})


class StoreRandomAgent:
    """Random tool calls with random, mostly malformed arguments; ends at random."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(stable_seed("store-random-agent", seed))

    def act(self, obs: Observation) -> Action:
        rng = self.rng
        if rng.random() < 0.08:
            return Action(tool="end_conversation", arguments={})
        tool = rng.choice(TOOLS)
        if tool.name == "send_message":
            return Action(tool=tool.name, arguments={"text": rng.choice(("Hello?", "Can you confirm?", "Done."))})
        return Action(tool=tool.name, arguments={})
