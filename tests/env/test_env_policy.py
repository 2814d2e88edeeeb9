"""The executable policy: one metamorphic test per rule and per case issue #12 settled, the reward
ordering, and the document rendered from the same clauses."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service.env import Action, reset, step
from service.env.dataset import PUBLIC
from service.env.grading import ALTERNATIVE, GOLD, HARMFUL, WRONG, decision_value
from service.env.models import DECISIONS
from service.env.policy import (
    CLAUSES,
    ESCALATION_THRESHOLD,
    REASONS,
    RESOLUTION_ORDER,
    RETURN_WINDOW_DAYS,
    evaluate,
    full_information_verdict,
    render_policy_markdown,
)
from service.env.world import CATALOG, INFO_TOPICS, Ticket
from tests.env.corpus_binding import resolution_ok

ROOT = Path(__file__).resolve().parents[2]


def _with(t: Ticket, **changes: Any) -> Ticket:
    """A copy of ``t`` with nested fields changed: ``order.days_since_delivery``, ``product.in_stock``
    (the claimed line's product), ``claim.item_used``…"""
    parts: dict[str, dict[str, Any]] = {}
    for key, value in changes.items():
        obj, _, name = key.partition(".")
        parts.setdefault(obj, {})[name] = value
    update: dict[str, Any] = {}
    order = t.order
    if "product" in parts:
        lines = list(order.lines)
        line = lines[t.claim.line]
        lines[t.claim.line] = line.model_copy(update={"product": line.product.model_copy(update=parts.pop("product"))})
        order = order.model_copy(update={"lines": tuple(lines)})
    if "order" in parts:
        order = order.model_copy(update=parts.pop("order"))
    update["order"] = order
    for obj, fields in parts.items():
        update[obj] = getattr(t, obj).model_copy(update=fields)
    return t.model_copy(update=update)


def _find(pred: Callable[[Ticket], bool]) -> Ticket:
    """The first plain train ticket (one claim, a low-risk customer) that ``pred`` accepts."""
    return next(
        t for t in PUBLIC.tickets("train") if t.claim.second_issue is None and not t.customer.high_risk and pred(t)
    )


def _in_window(t: Ticket) -> bool:
    days = t.order.days_since_delivery
    return days is not None and days <= RETURN_WINDOW_DAYS


def _plain_item(t: Ticket) -> bool:
    p = t.product
    return not (p.final_sale or p.hygiene or p.perishable)


def unused_change_of_mind() -> Ticket:
    return _find(
        lambda t: t.claim.issue == "changed_mind" and t.claim.item_used is False and _in_window(t) and _plain_item(t)
    )


def wrong_item() -> Ticket:
    return _find(lambda t: t.claim.issue == "wrong_item" and _in_window(t) and t.product.in_stock)


def defect_with_photos() -> Ticket:
    return _find(lambda t: t.claim.issue == "defective" and t.claim.images_provided and _in_window(t))


def not_received(status: str) -> Ticket:
    return _find(lambda t: t.claim.issue == "not_received" and t.order.carrier_status == status)


def _values(t: Ticket, revealed: frozenset[str] = frozenset()) -> dict[str, float]:
    v = evaluate(t, revealed)
    return {d: decision_value(d, v, t) for d in ("approve_refund", "approve_replacement", "reject")}


# ---------------------------------------------------------------------------- P1 and P6


def test_day_30_is_inside_the_return_window_and_day_31_is_not() -> None:
    t = unused_change_of_mind()
    assert evaluate(_with(t, **{"order.days_since_delivery": RETURN_WINDOW_DAYS})).gold == "approve_refund"
    late = evaluate(_with(t, **{"order.days_since_delivery": RETURN_WINDOW_DAYS + 1}))
    assert (late.gold, late.clauses[0], late.reason) == ("reject", "P1", "window")


def test_an_unstated_condition_is_asked_and_the_answer_decides() -> None:
    t = _with(unused_change_of_mind(), **{"claim.item_used": None, "hidden.item_used": True})
    assert (evaluate(t).gold, evaluate(t).ask_topic) == ("request_info", "usage")
    assert evaluate(t, frozenset({"usage"})).reason == "used"
    assert evaluate(_with(t, **{"hidden.item_used": False}), frozenset({"usage"})).gold == "approve_refund"


def test_final_sale_hygiene_and_perishables_block_returns_but_not_damage() -> None:
    t = unused_change_of_mind()
    for flag in ("final_sale", "hygiene", "perishable"):
        v = evaluate(_with(t, **{f"product.{flag}": True}))
        assert (v.gold, v.clauses[0], v.reason) == ("reject", "P6", "final_sale"), flag
    damaged = _find(lambda t: t.claim.issue == "damaged" and t.claim.images_provided and _in_window(t))
    for flag in ("final_sale", "hygiene", "perishable"):
        assert evaluate(_with(damaged, **{f"product.{flag}": True})).gold == evaluate(damaged).gold


def test_the_policy_document_names_every_hygiene_item_the_catalog_flags() -> None:
    """#12.6: the document's hygiene list and the catalog's flag are one fact (underwear included)."""
    doc = render_policy_markdown()
    flagged = [c.name for c in CATALOG if c.hygiene]
    assert "Seamless Underwear 3-Pack" in flagged
    assert all(name in doc for name in flagged)
    assert "order record flags hygiene items" in doc


# ------------------------------------------------------------------------------ P2 / P3 / P11


def test_photos_turn_a_question_into_an_approval_and_wear_into_a_denial() -> None:
    t = _with(defect_with_photos(), **{"claim.images_provided": False, "hidden.photos_show": "damage"})
    assert (evaluate(t).gold, evaluate(t).ask_topic) == ("request_info", "photos")
    assert evaluate(t, frozenset({"photos"})).gold.startswith("approve")
    wear = evaluate(_with(t, **{"hidden.photos_show": "normal_wear"}), frozenset({"photos"}))
    assert (wear.gold, wear.reason, wear.clauses[-1]) == ("reject", "normal_wear", "P11")


def test_deciding_without_the_photos_is_wrong_whatever_they_would_show() -> None:
    """#12.6: graded as wrong (0), never by the hidden photos the agent could not see."""
    t = _with(defect_with_photos(), **{"claim.images_provided": False})
    for shows in ("damage", "normal_wear"):
        assert set(_values(_with(t, **{"hidden.photos_show": shows})).values()) == {WRONG}


def test_a_warranty_defect_whose_photos_show_ordinary_wear_is_declined() -> None:
    """#12.6: P11 covers P3 as well as P2; approving it is harmful, declining it is gold."""
    t = defect_with_photos()
    late = _with(
        t,
        **{
            "order.days_since_delivery": 200,
            "product.warranty_days": 365,
            "claim.images_provided": False,
            "hidden.photos_show": "normal_wear",
        },
    )
    v = evaluate(late, frozenset({"photos"}))
    assert (v.gold, v.clauses[0], v.reason) == ("reject", "P3", "normal_wear")
    values = _values(late, frozenset({"photos"}))
    assert values["reject"] == GOLD and values["approve_refund"] == HARMFUL


def test_warranty_runs_from_delivery_and_its_last_day_counts() -> None:
    t = _with(defect_with_photos(), **{"product.warranty_days": 365})
    assert evaluate(_with(t, **{"order.days_since_delivery": 365})).clauses[0] == "P3"
    assert evaluate(_with(t, **{"order.days_since_delivery": 365})).gold.startswith("approve")
    ended = evaluate(_with(t, **{"order.days_since_delivery": 366}))
    assert (ended.gold, ended.reason) == ("reject", "warranty")


def test_a_defect_reported_after_day_30_falls_under_warranty_but_shipping_damage_does_not() -> None:
    """#12.6: P2's "within 30 days" vs P3's defect: a defect after day 30 is P3; damage after day 30 is declined."""
    t = _with(defect_with_photos(), **{"order.days_since_delivery": 45, "product.warranty_days": 365})
    assert evaluate(t).clauses[0] == "P3" and evaluate(t).gold.startswith("approve")
    damage = evaluate(_with(t, **{"claim.issue": "damaged"}))
    assert (damage.gold, damage.clauses[0], damage.reason) == ("reject", "P2", "window")


def test_a_wrong_item_needs_no_photo_and_is_declined_after_30_days() -> None:
    t = wrong_item()
    assert evaluate(_with(t, **{"claim.images_provided": False})).gold == "approve_replacement"
    late = evaluate(_with(t, **{"order.days_since_delivery": RETURN_WINDOW_DAYS + 1}))
    assert (late.gold, late.clauses[0], late.reason) == ("reject", "P4", "window")


def test_stock_decides_between_replacement_and_refund() -> None:
    t = wrong_item()
    assert evaluate(t).gold == "approve_replacement" and "approve_refund" in evaluate(t).alternatives
    out = evaluate(_with(t, **{"product.in_stock": False}))
    assert out.gold == "approve_refund" and out.alternatives == ()


# ------------------------------------------------------------------------------------- P5


def test_non_delivery_has_no_time_limit() -> None:
    t = not_received("lost")
    assert t.order.days_since_delivery is None
    for placed in ("2025-01-01", t.order.order_date):
        assert evaluate(_with(t, **{"order.order_date": placed})).gold.startswith("approve")


def test_an_in_transit_parcel_not_yet_late_is_declined_and_approving_it_is_harmful() -> None:
    """#12.6: like every approval the policy forbids, approving it costs −0.5 (no longer 0.0)."""
    t = _with(not_received("in_transit"), **{"order.days_past_estimate": 2})
    v = evaluate(t)
    assert (v.gold, v.reason) == ("reject", "in_transit")
    assert _values(t)["approve_refund"] == HARMFUL and _values(t)["approve_replacement"] == HARMFUL
    late = evaluate(_with(t, **{"order.days_past_estimate": 8}))
    assert late.gold.startswith("approve") and late.clauses[0] == "P5"


def test_carrier_delivered_is_asked_then_found_or_lost() -> None:
    t = not_received("delivered")
    assert (evaluate(t).gold, evaluate(t).ask_topic) == ("request_info", "delivery")
    assert evaluate(_with(t, **{"hidden.parcel_found": True}), frozenset({"delivery"})).reason == "parcel_found"
    assert evaluate(_with(t, **{"hidden.parcel_found": False}), frozenset({"delivery"})).gold.startswith("approve")


# ------------------------------------------------------------------------------------- P7


@pytest.mark.parametrize(
    "change", [{"customer.returns_12m": 5}, {"customer.chargebacks": 1}, {"customer.fraud_flag": True}]
)
def test_a_high_risk_customer_turns_an_unverifiable_claim_into_a_fraud_routed_denial(change: dict[str, Any]) -> None:
    t = wrong_item()
    v = evaluate(_with(t, **change))
    assert (v.gold, v.clauses[0], v.queue, v.tag, v.reason) == ("reject", "P7", "Fraud", "Fraud_Risk", "unverifiable")
    assert evaluate(_with(t, **{"customer.returns_12m": 4})).gold == "approve_replacement"


def test_p7_exempts_carrier_confirmed_loss_and_billing_errors_which_keep_their_own_route() -> None:
    """#12.6: exempt claims follow their own clause's queue; a carrier's "delivered" is not exempt."""
    lost = evaluate(_with(not_received("lost"), **{"customer.fraud_flag": True}))
    assert lost.gold.startswith("approve") and lost.clauses[0] == "P5" and lost.queue in ("Returns", "Escalations")
    billing = _find(lambda t: t.claim.issue == "duplicate_charge" and t.order.charges == 2)
    risky_billing = evaluate(_with(billing, **{"customer.chargebacks": 2}))
    assert (risky_billing.gold, risky_billing.clauses[0], risky_billing.queue) == ("approve_refund", "P10", "Billing")
    delivered = _with(not_received("delivered"), **{"customer.fraud_flag": True, "hidden.parcel_found": False})
    v = evaluate(delivered, frozenset({"delivery"}))
    assert (v.gold, v.clauses[0], v.queue) == ("reject", "P7", "Fraud")


# ------------------------------------------------------------------------------ P8 and P10


def test_escalation_is_decided_by_the_claimed_items_amount_not_the_order_total() -> None:
    t = _with(wrong_item(), **{"product.in_stock": False})
    line = t.order.lines[t.claim.line]
    big = _with(t, **{"product.price": ESCALATION_THRESHOLD + 50 / line.quantity})
    small = _with(t, **{"product.price": 100.0 / line.quantity, "order.amount": 5000.0})
    assert (evaluate(big).queue, "P8" in evaluate(big).clauses) == ("Escalations", True)
    assert (evaluate(small).queue, "P8" in evaluate(small).clauses) == ("Returns", False)
    assert evaluate(small).refund_amount == pytest.approx(100.0)


def test_a_duplicate_charge_refund_above_the_threshold_stays_with_billing() -> None:
    """#12.6: P10 and P8 agree: billing errors stay with Billing at any amount."""
    t = _find(lambda t: t.claim.issue == "duplicate_charge" and t.order.charges == 2)
    v = evaluate(_with(t, **{"order.amount": ESCALATION_THRESHOLD * 3}))
    assert (v.gold, v.queue, "P8" in v.clauses) == ("approve_refund", "Billing", False)
    single = evaluate(_with(t, **{"order.charges": 1}))
    assert (single.gold, single.reason, single.queue) == ("reject", "not_charged_twice", "Billing")


# ---------------------------------------------------------------------------- P9, P12, P13


def test_a_vague_message_is_asked_about_then_decided_on_the_answer() -> None:
    t = next(t for t in PUBLIC.tickets("train") if t.claim.issue == "vague" and t.hidden.actual_issue is not None)
    assert (evaluate(t).gold, evaluate(t).ask_topic, evaluate(t).clauses[0]) == ("request_info", "details", "P9")
    assert evaluate(t, frozenset(INFO_TOPICS)).issue == t.hidden.actual_issue


def test_records_decide_not_the_customers_recollection() -> None:
    t = unused_change_of_mind()
    for said in (None, 3, 60, 400):
        assert evaluate(_with(t, **{"claim.stated_days_ago": said})) == evaluate(t)


def test_of_two_claims_the_one_first_in_the_resolution_order_decides_and_remarks_change_nothing() -> None:
    t = _with(
        defect_with_photos(),
        **{"claim.issue": "changed_mind", "claim.second_issue": "damaged", "claim.item_used": True},
    )
    v = evaluate(t)
    assert v.issue == "damaged" and v.clauses[0] == "P2" and v.gold.startswith("approve")
    alone = evaluate(_with(t, **{"claim.second_issue": None}))
    assert (alone.gold, alone.reason) == ("reject", "used")
    for remark in ("slow_delivery", "second_contact", "service"):
        assert evaluate(_with(t, **{"claim.remark": remark})) == v


# ------------------------------------------------------------------------- reward ordering


def test_reward_ordering_gold_alternative_wrong_harmful_on_every_dev_ticket() -> None:
    for t in PUBLIC.tickets("dev"):
        v = full_information_verdict(t)
        values = {d: decision_value(d, v, t) for d in DECISIONS if d != "request_info"}
        assert values[v.gold] == GOLD
        for d, value in values.items():
            if d in v.alternatives:
                assert value == ALTERNATIVE
            elif d in v.harmful:
                assert value == HARMFUL
            elif d != v.gold:
                assert value == WRONG
        if v.gold == "reject":  # every denial protects the store: approving instead is harmful
            assert set(v.harmful) == {"approve_refund", "approve_replacement"}


def test_decision_step_rewards_are_ordered_on_real_episodes() -> None:
    pool = PUBLIC.pool("dev", "decision", "easy")
    seed = next(
        i
        for i, tid in enumerate(pool)
        if (lambda v: v.gold == "approve_replacement" and v.clauses[0] == "P4")(evaluate(PUBLIC.ticket(tid)))
    )
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


def test_every_verdict_on_every_public_ticket_names_its_clauses_reason_and_question() -> None:
    """Every case the generator produces is settled by a clause."""
    ids = {c.id for c in CLAUSES}
    for split in ("train", "dev"):
        for t in PUBLIC.tickets(split):
            for revealed in (frozenset(), frozenset(INFO_TOPICS)):
                v = evaluate(t, revealed)
                assert v.clauses and set(v.clauses) <= ids and v.rationale
                assert (v.reason is not None) == (v.gold == "reject")
                assert set(v.reasons) <= set(REASONS) and (not v.reason or v.reasons[0] == v.reason)
                assert (v.ask_topic is not None) == (v.gold == "request_info")
            assert full_information_verdict(t).gold != "request_info", t.ticket_id


@settings(max_examples=200, deadline=None)
@given(
    index=st.integers(0, 1199),
    days=st.integers(0, 400),
    in_stock=st.booleans(),
    final_sale=st.booleans(),
    returns=st.integers(0, 12),
)
def test_policy_is_total_and_consistent_on_perturbed_tickets(
    index: int, days: int, in_stock: bool, final_sale: bool, returns: int
) -> None:
    t = PUBLIC.tickets("train")[index]
    if t.order.days_since_delivery is not None:
        t = _with(t, **{"order.days_since_delivery": days})
    t = _with(t, **{"product.in_stock": in_stock, "product.final_sale": final_sale, "customer.returns_12m": returns})
    v = evaluate(t)
    assert v.gold not in v.alternatives and v.gold not in v.harmful
    assert not set(v.alternatives) & set(v.harmful)
    if v.gold == "approve_replacement":
        assert t.product.in_stock
    if returns >= 5 and v.gold.startswith("approve"):
        assert v.clauses[0] in ("P5", "P10")  # only verifiable claims pass a high-risk account


# ------------------------------------------------------------------- P14 reply rules, metamorphic


def _reply_passes(t: Ticket, decision: str, reply: str) -> bool:
    from service.env.replies import judge

    verdict = evaluate(t)
    return resolution_ok(judge(reply.format(oid=t.order.order_id), t, decision, verdict, frozenset()))


_UNVERIFIABLE = (
    "Thank you for contacting us about order {oid}. "
    "I'm sorry, but we couldn't verify this claim, so we can't approve it."
)
_RISK_NAMED = (
    "Thank you for contacting us about order {oid}. I'm sorry, but because of the number of returns on your account, "
    "we can't approve this claim."
)
_APPROVED = (
    "Thank you for contacting us about order {oid}, and sorry for the trouble. "
    "We have approved a full refund for order {oid}."
)


def test_p7_declines_say_the_claim_cannot_be_verified_and_never_why() -> None:
    """P7 and P14 together: flipping only the fraud flag turns an approved claim into a P7 decline. Then the
    "cannot be verified" reply is the actual reason stated; naming the risk assessment (the real cause)
    fails as a leak, and the approval reply no longer fits. Without the flag, the decline wording fails."""
    t = unused_change_of_mind()
    flagged = _with(t, **{"customer.fraud_flag": True})
    assert (
        evaluate(t).gold == "approve_refund"
        and evaluate(flagged).gold == "reject"
        and evaluate(flagged).reason == "unverifiable"
    )
    assert _reply_passes(flagged, "reject", _UNVERIFIABLE)
    assert not _reply_passes(flagged, "reject", _RISK_NAMED)
    assert not _reply_passes(flagged, "approve_refund", _UNVERIFIABLE)
    assert _reply_passes(t, "approve_refund", _APPROVED) and not _reply_passes(t, "reject", _UNVERIFIABLE)


_USED = (
    "Thank you for contacting us about order {oid}. "
    "I'm sorry, but the item has been used, so we can't accept the return."
)
_WINDOW = (
    "Thank you for contacting us about order {oid}. I'm sorry, but it is outside our 30-day return window, "
    "so we can't accept the return."
)


def test_the_window_is_required_only_when_the_time_limit_is_the_reason() -> None:
    """P14: a used item inside the window is declined for its use — the reply need not (and may not)
    give the window. Moving only the delivery date past day 30 makes the window a true reason: the
    window reply passes, and so does the use reply (a true reason of the verdict)."""
    t = _find(lambda t: t.claim.issue == "item_used" and _in_window(t) and _plain_item(t) and len(t.order.lines) == 1)
    late = _with(t, **{"order.days_since_delivery": RETURN_WINDOW_DAYS + 12})
    assert evaluate(t).reasons == ("used",) and "window" in evaluate(late).reasons
    assert _reply_passes(t, "reject", _USED) and not _reply_passes(t, "reject", _WINDOW)
    assert _reply_passes(late, "reject", _WINDOW) and _reply_passes(late, "reject", _USED)
