"""The store desk's tools as agents see them: descriptions and instructions that read as plain sentences,
and outputs that are records and backend errors — never a policy clause (store-track.md: "No tool output
names a clause")."""

from __future__ import annotations

import re
from typing import Any

import pytest

from service.env import PUBLIC, TASKS
from service.env.agents import make_agent, play
from service.env.models import Action, EpisodeState, Observation
from service.env.store import episode
from service.env.store.state import StoreProgress
from service.env.store.tools import TOOLS
from service.env.toolbox import LEGACY_TOOLS
from tests.env.store_oracles import GoldOracle

CLAUSE_ID = re.compile(r"\bP\d{1,2}\b")
POLICY_TOOLS = ("search_policy", "read_policy")  # their output is the policy itself
_DOUBLE_STOP = re.compile(r"(?<!\.)\.\.(?!\.)")  # ".." but not an ellipsis


@pytest.mark.parametrize("tool", [*TOOLS, *LEGACY_TOOLS], ids=lambda t: t.name)
def test_a_tool_description_is_one_plain_line(tool) -> None:
    text = tool.description
    assert text and "\n" not in text and "  " not in text and not _DOUBLE_STOP.search(text), repr(text)


def test_the_store_instructions_read_as_sentences() -> None:
    for task in (t for t in TASKS.values() if t.family == "store"):
        text = task.instructions
        where = re.findall(r".{30}(?:\.\.|  ).{30}", text)
        assert not _DOUBLE_STOP.search(text) and "  " not in text and "\n" not in text, where


def _step(ticket, state: EpisodeState, name: str, arguments: dict[str, Any]) -> EpisodeState:
    return episode.step(state, Action(tool=name, arguments=arguments), ticket)[0]


def _outputs(ticket, calls: list[tuple[str, dict[str, Any]]]) -> list[tuple[str, str]]:
    state = EpisodeState(
        task_id=f"store-{ticket.difficulty}",
        split=ticket.split,
        seed=0,
        ticket_id=ticket.ticket_id,
        max_steps=200,
        store=StoreProgress(),
    )
    out = []
    for name, arguments in calls:
        state = _step(ticket, state, name, arguments)
        out.append((name, str(state.tool_result)))
    return out


def _probes(ticket) -> list[tuple[str, dict[str, Any]]]:
    """Calls a backend refuses or answers on every order and line: too much, to the wrong place, twice."""
    calls: list[tuple[str, dict[str, Any]]] = [("get_customer", {"customer_id": ticket.db.account.customer_id})]
    for order in ticket.db.orders:
        calls.append(("get_order", {"order_id": order.order_id}))
        for s in order.shipments:
            calls.append(("get_shipment", {"shipment_id": s.shipment_id}))
        for ln in order.lines:
            items = [{"line_no": ln.line_no, "quantity": ln.quantity}]
            for to in [p.payment_id for p in order.payments] + ["store_credit", "pay_nowhere"]:
                for amount in (0.01, ln.unit_price * ln.quantity / 100 + 50, 99999):
                    calls.append(
                        (
                            "refund",
                            {
                                "order_id": order.order_id,
                                "items": items,
                                "include_shipping": True,
                                "amounts": [{"to": to, "amount": amount}],
                            },
                        )
                    )
            calls.append(("replace_item", {"order_id": order.order_id, "line_no": ln.line_no, "quantity": 9}))
            calls.append(("exchange_item", {"order_id": order.order_id, "line_no": ln.line_no, "new_sku": ln.sku}))
            calls.append(("open_return", {"order_id": order.order_id, "items": items, "label": "prepaid"}))
            calls.append(("cancel_items", {"order_id": order.order_id, "line_nos": [ln.line_no]}))
            calls.append(("get_product", {"product_id": ln.product_id}))
            for v in ticket.db.catalog:
                if v.product_id == ln.product_id and v.sku != ln.sku:
                    calls.append(
                        ("exchange_item", {"order_id": order.order_id, "line_no": ln.line_no, "new_sku": v.sku})
                    )
        calls.append(("refund", {"order_id": order.order_id, "amounts": [{"to": "store_credit", "amount": 1}]}))
        address = {"order_id": order.order_id, "line1": "1 Road", "city": "X", "postal_code": "Y"}
        calls.append(("change_address", address))
    return calls


class _Watch:
    """A player that keeps every observation it is shown."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.seen: list[Observation] = []

    def act(self, obs: Observation) -> Action:
        self.seen.append(obs)
        return self.inner.act(obs)


def test_no_tool_output_names_a_policy_clause() -> None:
    """Every output and error of every tool but the policy's own, on probes of every dev store ticket and
    on the gold, heuristic and random players' conversations."""
    named = []
    for ticket in PUBLIC.store_tickets("dev"):
        for name, out in _outputs(ticket, _probes(ticket)):
            if name not in POLICY_TOOLS and CLAUSE_ID.search(out):
                named.append((ticket.ticket_id, name, out[:200]))
    for d in ("easy", "medium", "hard"):
        pool = PUBLIC.pool("dev", "store", d)
        for seed, tid in enumerate(pool[:20]):
            for agent in (GoldOracle(tid, PUBLIC), make_agent("heuristic", seed, tid), make_agent("random", seed, tid)):
                watch = _Watch(agent)
                play(watch, f"store-{d}", seed, "dev")
                for obs in watch.seen:
                    result = obs.tool_result or {}
                    if result.get("tool") not in POLICY_TOOLS and CLAUSE_ID.search(str(result)):
                        named.append((tid, result.get("tool"), str(result)[:200]))
    assert not named, named[:5]
