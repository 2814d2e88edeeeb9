"""The executable policy: metamorphic pairs, reward ordering, the rendered document."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service.env import Action, reset, step
from service.env.dataset import PUBLIC
from service.env.grading import HARMFUL, decision_value, forbidden_content
from service.env.models import DECISIONS
from service.env.policy import CLAUSES, INFO_TOPICS, REASONS, RESOLUTION_ORDER, evaluate, full_information_verdict, render_policy_markdown
from service.env.world import Ticket

ROOT = Path(__file__).resolve().parents[1]


def _with(t: Ticket, **changes) -> Ticket:
    """A copy of ``t`` with nested fields changed: keys like ``order.days_since_delivery``."""
    parts: dict[str, dict] = {}
    for key, value in changes.items():
        obj, _, field = key.partition(".")
        parts.setdefault(obj, {})[field] = value
    update = {}
    for obj, fields in parts.items():
        if obj == "product":
            update["order"] = t.order.model_copy(update={"product": t.order.product.model_copy(update=fields)})
        else:
            update[obj] = getattr(t, obj).model_copy(update=fields)
    return t.model_copy(update=update)


def _find(scenario: str) -> Ticket:
    return next(t for t in PUBLIC.tickets("train") if t.scenario == scenario and not t.customer.high_risk)


# ---------------------------------------------------------------------- metamorphic pairs

def test_flipping_the_return_window_flips_the_decision() -> None:
    t = _find("unused_change_of_mind")
    assert evaluate(t).gold == "approve_refund"
    late = _with(t, **{"order.days_since_delivery": 31})
    assert evaluate(late).gold == "reject" and evaluate(late).clauses[0] == "P1"
    assert evaluate(_with(t, **{"order.days_since_delivery": 30})).gold == "approve_refund"


def test_photos_turn_request_info_into_an_approval() -> None:
    t = _find("damaged_without_photos")
    assert evaluate(t).gold == "request_info" and evaluate(t).ask_topic == "photos"
    with_photos = _with(t, **{"claim.images_provided": True})
    assert evaluate(with_photos).gold in ("approve_replacement", "approve_refund")
    assert evaluate(with_photos).clauses[0] == "P2"


def test_a_high_risk_customer_turns_a_valid_claim_into_a_rejection() -> None:
    t = _find("wrong_item_in_stock")
    assert evaluate(t).gold == "approve_replacement"
    for change in ({"customer.returns_12m": 5}, {"customer.chargebacks": 1}, {"customer.fraud_flag": True}):
        v = evaluate(_with(t, **change))
        assert (v.gold, v.clauses[0], v.queue) == ("reject", "P7", "Fraud"), change
    assert evaluate(_with(t, **{"customer.returns_12m": 4})).gold == "approve_replacement"


def test_high_risk_does_not_override_carrier_verified_loss() -> None:
    t = _find("lost_in_stock")
    v = evaluate(_with(t, **{"customer.fraud_flag": True}))
    assert v.gold == "approve_replacement" and v.clauses[0] == "P5"


def test_stock_decides_between_replacement_and_refund() -> None:
    t = _find("wrong_item_in_stock")
    assert evaluate(t).gold == "approve_replacement" and "approve_refund" in evaluate(t).alternatives
    out = evaluate(_with(t, **{"product.in_stock": False}))
    assert out.gold == "approve_refund" and out.alternatives == ()


def test_final_sale_blocks_change_of_mind_but_not_damage() -> None:
    t = _find("unused_change_of_mind")
    v = evaluate(_with(t, **{"product.final_sale": True}))
    assert (v.gold, v.clauses[0], v.reason) == ("reject", "P6", "final_sale")
    damaged = _find("damaged_with_photos")
    assert evaluate(_with(damaged, **{"product.final_sale": True})).gold == evaluate(damaged).gold


def test_warranty_decides_late_defects() -> None:
    t = _find("warranty_defect")
    days = t.order.days_since_delivery
    assert evaluate(t).clauses[0] == "P3" and evaluate(t).gold.startswith("approve")
    expired = evaluate(_with(t, **{"product.warranty_days": days - 1}))
    assert (expired.gold, expired.reason) == ("reject", "warranty")


def test_carrier_status_decides_non_delivery() -> None:
    t = _find("delivered_but_missing")
    assert evaluate(t).gold == "request_info" and evaluate(t).ask_topic == "delivery"
    assert evaluate(_with(t, **{"order.carrier_status": "lost"})).gold.startswith("approve")
    found = _with(t, **{"hidden.parcel_found": True})
    assert evaluate(found, frozenset({"delivery"})).gold == "reject"
    missing = _with(t, **{"hidden.parcel_found": False})
    assert evaluate(missing, frozenset({"delivery"})).gold.startswith("approve")


def test_escalation_routes_only_large_refunds() -> None:
    t = _find("damaged_out_of_stock")
    big = evaluate(_with(t, **{"order.amount": 450.0}))
    small = evaluate(_with(t, **{"order.amount": 120.0}))
    assert (big.gold, big.queue, "P8" in big.clauses) == ("approve_refund", "Escalations", True)
    assert (small.gold, small.queue, "P8" in small.clauses) == ("approve_refund", "Returns", False)


# ---------------------------------------------------------------------- reward ordering

def test_reward_ordering_gold_alternative_wrong_harmful_on_every_dev_ticket() -> None:
    for t in PUBLIC.tickets("dev"):
        v = evaluate(t)
        if v.gold == "request_info":
            v = full_information_verdict(t)
        values = {d: decision_value(d, v, t) for d in DECISIONS if d != "request_info"}
        assert values[v.gold] == 1.0
        for d, value in values.items():
            if d in v.alternatives:
                assert 0 < value < 1.0
            elif d in v.harmful:
                assert value == HARMFUL < 0
            elif d != v.gold:
                assert value == 0.0


def test_decision_step_rewards_are_ordered_on_real_episodes() -> None:
    t_id = next(t.ticket_id for t in PUBLIC.tickets("dev") if t.family == "decision" and t.scenario == "wrong_item_in_stock")
    seed = PUBLIC.pool("dev", "decision", "easy").index(t_id)
    rewards = {}
    for d in ("approve_replacement", "approve_refund", "reject"):
        state, _ = reset("decision-easy", seed, "dev")
        rewards[d] = step(state, Action(decision=d)).reward
    assert rewards["approve_replacement"] == 1.0 > rewards["approve_refund"] == 0.5 > rewards["reject"]
    assert rewards["reject"] < 0  # rejecting an evidenced wrong-item claim is harmful


# --------------------------------------------------------------------------- the document

def test_policy_document_is_rendered_from_the_clauses_and_committed_fresh() -> None:
    doc = render_policy_markdown()
    for clause in CLAUSES:
        assert f"## {clause.id}. {clause.title}" in doc and clause.text in doc
    assert " → ".join(RESOLUTION_ORDER) in doc
    committed = (ROOT / "seed_data" / "policy.md").read_text(encoding="utf-8")
    assert committed == doc, "seed_data/policy.md is stale: run `make data`"


def test_every_verdict_names_its_clauses_and_rationale() -> None:
    for t in PUBLIC.tickets("dev"):
        for revealed in (frozenset(), frozenset(INFO_TOPICS)):
            v = evaluate(t, revealed)
            assert v.clauses and all(c in {x.id for x in CLAUSES} for c in v.clauses)
            assert v.rationale
            assert (v.reason is not None) == (v.gold == "reject")
            if v.reason:
                assert v.reason in REASONS
            assert (v.ask_topic is not None) == (v.gold == "request_info")


@settings(max_examples=200, deadline=None)
@given(
    index=st.integers(0, 1199),
    days=st.integers(0, 400),
    in_stock=st.booleans(),
    final_sale=st.booleans(),
    returns=st.integers(0, 12),
)
def test_policy_is_total_and_consistent_on_perturbed_tickets(index, days, in_stock, final_sale, returns) -> None:
    t = PUBLIC.tickets("train")[index]
    if t.order.days_since_delivery is not None:
        t = _with(t, **{"order.days_since_delivery": days})
    t = _with(t, **{"product.in_stock": in_stock, "product.final_sale": final_sale, "customer.returns_12m": returns})
    v = evaluate(t)
    assert v.gold not in v.alternatives and v.gold not in v.harmful
    assert not set(v.alternatives) & set(v.harmful)
    if v.gold == "approve_replacement":
        assert t.order.product.in_stock
    if returns >= 5 and v.gold.startswith("approve"):
        assert v.clauses[0] in ("P5", "P10")  # only verifiable claims pass a high-risk account


def test_forbidden_reply_content() -> None:
    assert forbidden_content("Thanks! Your account was flagged for fraud.", denying=True) == ["leaks internal risk notes"]
    assert forbidden_content("Sorry, but we will refund you anyway.", denying=True) == ["promises an outcome it denies"]
    assert forbidden_content("We will refund you.", denying=False) == []
    assert "rude" in forbidden_content("Not our problem, whatever.", denying=False)
    assert PUBLIC.ticket(PUBLIC.pool("dev", "decision", "easy")[0])  # the dev split is addressable by id
