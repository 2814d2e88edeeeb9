"""Issue #12 on the whole dev split: replies graded on meaning against the agent's own decision, no
single-field shortcut inside a pool, hard tickets that need their dates counted, coherent messages,
and one rubric table that grading reads and the docs render."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bench.gaming_agents import record_fields
from service.env import TICKET_TASKS as TASKS  # the ticket tasks: the store desk has its own tests
from service.env import Action, Dataset, derive_test_key, grade_episode, reset, step
from service.env.core import lookup_record, ticket_text
from service.env.dataset import PUBLIC
from service.env.messages import inconsistencies
from service.env.policy import evaluate
from service.env.tasks import render_rubrics_markdown
from service.env.world import Ticket
from tests.env.shortcuts import best_single_field, fields

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "docs" / "methodology.md").read_text(encoding="utf-8")


# ------------------------------------------------------------------- single-field shortcuts


# What the best single-field rule measures (fitted on train, chosen by cross-validation on train), on dev and
# on a fresh-key test split; each task's cap is the larger, rounded up to the next 0.05. Before #21's follow-up
# every medium and hard pool had one cap, 0.6, that routing came within 0.018 of; easy pools had none.
SINGLE_FIELD = {  # task: (field, dev, test, cap)
    "decision-easy": ("claim_type", 0.567, 0.612, 0.65),
    "decision-medium": ("claim_type", 0.433, 0.373, 0.45),
    "decision-hard": ("claimed.in_stock", 0.485, 0.455, 0.50),
    "workflow-triage": ("claim_type", 0.597, 0.672, 0.70),
    "workflow-routing": ("risk.high", 0.582, 0.582, 0.60),
    "workflow-resolution": ("claim_type", 0.530, 0.500, 0.55),
}
FRESH = Dataset(test_key=derive_test_key("a deployment key for the gaming suite"))


@pytest.mark.parametrize("task_id", list(TASKS))
def test_no_single_visible_field_decides_a_pool(task_id: str) -> None:
    """#12.7 / #21: the best one-field rule fitted on train over every visible field (each record field, the
    claim type, the subject, and the derived ones) stays at what it measured, on dev and on a fresh test
    split; methodology.md prints the table. Before #12: up to 0.955 (routing: the claim type)."""
    field, dev, test, cap = SINGLE_FIELD[task_id]
    measured = best_single_field(task_id, PUBLIC), best_single_field(task_id, FRESH, "train", "test")
    assert [(m[0], round(m[1], 3)) for m in measured] == [(field, dev), (field, test)], measured
    assert max(dev, test) <= cap < max(dev, test) + 0.05
    assert f"| {task_id} | `{field}` | {dev:.3f} | {test:.3f} |" in README


def test_the_single_field_rules_cover_every_visible_field_derived_ones_included() -> None:
    """#21.6: besides each record field, the claim type and the subject, a field an agent gets by one
    step of arithmetic or by picking the claimed item counts too: the claimed item's own fields (its
    stock, flags, warranty, amount), the P7 risk flag, the days since delivery counted from the dates
    (hard tickets show only dates) and since the order, every item's days past its warranty, the tier,
    whether the parcel arrived, a second claim. Every field the gaming suite's learned readers see is one
    of them (bench.gaming_agents.record_fields: the records as the lookup tool returns them)."""
    hard = next(t for t in PUBLIC.tickets("dev") if t.difficulty == "hard" and t.order.delivery_date)
    names = set(fields(hard))
    claimed = {"claimed.in_stock", "claimed.final_sale", "claimed.hygiene", "claimed.perishable"}
    assert claimed | {"claimed.warranty_days", "claimed.amount", "claimed.category"} <= names
    assert {"risk.high", "days_since_delivery", "days_past_warranty", "images_provided"} <= names
    assert {"days_since_order", "order.items.0.days_past_warranty", "tier", "delivered", "second_claim"} <= names
    assert fields(hard)["days_since_delivery"] == hard.order.days_since_delivery
    for task_id in TASKS:
        for seed in range(20):
            _, obs = reset(task_id, seed, "dev")
            ticket = PUBLIC.ticket(obs.ticket_id)
            seen = record_fields(obs, lookup_record(ticket, "order"), lookup_record(ticket, "customer"))
            assert {k for k in seen if k.startswith(("order.", "customer."))} <= set(fields(ticket)), task_id


# ------------------------------------------------------------------------ hard tickets


def test_hard_tickets_give_dates_and_leave_the_counting_to_the_agent() -> None:
    """#12.6: order, delivery and opening dates instead of "delivered N days ago"."""
    for ticket in PUBLIC.tickets("dev"):
        text, record = ticket_text(ticket), lookup_record(ticket, "order")
        if ticket.difficulty == "hard":
            assert "days ago" not in text.split("\n\n")[0] and "days_since_delivery" not in record
            assert f"Opened on {ticket.opened_on}" in text and record["order_date"] == ticket.order.order_date
            if ticket.order.delivery_date:
                assert ticket.order.delivery_date in text
        else:
            assert record["days_since_delivery"] == ticket.order.days_since_delivery


def test_the_hard_pools_hold_the_reasoning_they_promise() -> None:
    """#12.6: multi-item orders, two claims, recollections that the records contradict, answers that
    change the verdict, and high-risk accounts all occur in the hard pools."""
    hard = [t for t in PUBLIC.tickets("dev") if t.difficulty == "hard"]
    assert sum(len(t.order.lines) > 1 for t in hard) >= 40
    assert sum(t.claim.second_issue is not None for t in hard) >= 15
    assert (
        sum(
            t.claim.stated_days_ago is not None and t.claim.stated_days_ago != t.order.days_since_delivery for t in hard
        )
        >= 15
    )
    assert sum(evaluate(t).gold == "request_info" for t in hard) >= 15
    assert sum(t.customer.high_risk for t in hard) >= 10


# ------------------------------------------------------------------------- coherent messages


def _changed(t: Ticket, **claim: object) -> Ticket:
    return t.model_copy(update={"claim": t.claim.model_copy(update=claim)})


def test_the_consistency_check_refuses_incoherent_combinations() -> None:
    """#12.5: never-arrived-and-dented, months of wear on a days-old delivery are refused (and the
    generator redraws them: every public ticket passes, see test_env_agents_and_data)."""
    lost = next(t for t in PUBLIC.tickets("train") if t.claim.issue == "not_received")
    assert inconsistencies(_changed(lost, second_issue="damaged"))
    fresh = next(
        t
        for t in PUBLIC.tickets("train")
        if t.order.days_since_delivery is not None
        and t.order.days_since_delivery < 10
        and t.claim.issue in ("damaged", "defective")
    )
    worn = fresh.model_copy(update={"hidden": fresh.hidden.model_copy(update={"photos_show": "normal_wear"})})
    assert any("wear" in p for p in inconsistencies(worn))


# ---------------------------------------------------------------- replies in full episodes


def _resolution(pred) -> tuple[tuple[str, int], Ticket]:
    """The first single-item, single-claim resolution ticket (dev, then train) that ``pred`` accepts."""
    for split in ("dev", "train"):
        for seed, tid in enumerate(PUBLIC.pool(split, "workflow", "hard")):
            t = PUBLIC.ticket(tid)
            if len(t.order.lines) == 1 and t.claim.second_issue is None and pred(t, evaluate(t)):
                return (split, seed), t
    raise LookupError


def _resolve(where: tuple[str, int], decision: str, tag: str, reply: str):
    split, seed = where
    state, _ = reset("workflow-resolution", seed, split)
    state = step(state, Action(lookup="policy")).state
    state = step(state, Action(decision=decision, add_tag=tag, reply=reply, close_ticket=True)).state
    return grade_episode(state)


def _check(grade, name: str) -> bool:
    return next(c for c in grade.components if c.name == name).passed


def test_a_self_contradicting_reply_earns_no_reply_credit() -> None:
    """#12.1: "We approve your refund. We decline your refund: outside the 30-day window." on a reject."""
    seed, t = _resolution(lambda t, v: v.gold == "reject" and v.reason == "window")
    oid = t.order.order_id
    good = _resolve(
        seed,
        "reject",
        "Policy_Denied",
        f"Thank you for writing about order {oid}. I'm sorry, but it's outside our 30-day return window, "
        "so we can't accept the return.",
    )
    assert good.resolved, good.components
    bad = _resolve(
        seed,
        "reject",
        "Policy_Denied",
        f"Thanks for order {oid}. We approve your refund. We decline your refund: outside the 30-day return window.",
    )
    assert not bad.resolved and not _check(bad, "reply_clean")


def test_a_refusal_on_an_approved_ticket_does_not_state_the_outcome() -> None:
    """#12.1: "Sorry, we cannot offer a refund." after deciding approve_refund."""
    seed, t = _resolution(lambda t, v: v.gold == "approve_refund" and v.queue == "Returns")
    grade = _resolve(
        seed, "approve_refund", "Refund", f"Sorry about order {t.order.order_id}, we cannot offer a refund."
    )
    assert not grade.resolved and not _check(grade, "reply_outcome")


def test_the_reply_is_graded_against_the_agents_own_decision_and_any_true_reason() -> None:
    """#12.1-2: a used-item denial inside the window need not quote the 30-day window."""
    seed, t = _resolution(lambda t, v: v.gold == "reject" and v.reason == "used" and "window" not in v.reasons)
    grade = _resolve(
        seed,
        "reject",
        "Policy_Denied",
        f"Hi, thanks for getting in touch about order {t.order.order_id}. I'm sorry, but as the item has "
        "been worn we can't take it back.",
    )
    assert grade.resolved, [c.detail for c in grade.components if not c.passed]


def test_a_holding_reply_that_grants_is_not_a_holding_reply() -> None:
    """#12.1: "Your refund is approved!" as a routing holding reply."""
    pool = PUBLIC.pool("dev", "workflow", "medium")
    seed = next(i for i, tid in enumerate(pool) if evaluate(PUBLIC.ticket(tid)).queue == "Returns")
    t = PUBLIC.ticket(pool[seed])
    state, _ = reset("workflow-routing", seed, "dev")
    ok = step(
        state,
        Action(
            reassign_queue="Returns",
            close_ticket=True,
            reply=f"Thanks for your patience: our returns team now has order {t.order.order_id} and "
            "will get back to you.",
        ),
    ).state
    assert grade_episode(ok).resolved
    granted = step(
        state,
        Action(
            reassign_queue="Returns",
            close_ticket=True,
            reply=f"Thanks! Your refund for order {t.order.order_id} is approved!",
        ),
    ).state
    assert not grade_episode(granted).resolved


# ------------------------------------------------------------------------ one rubric table


def test_the_readme_renders_the_rubric_table_that_grading_reads() -> None:
    block = re.search(r"<!-- rubrics:start -->\n(.*?)<!-- rubrics:end -->", README, re.S)
    assert block, "README.md lacks the rubric block"
    assert block.group(1).strip() == render_rubrics_markdown().strip(), (
        "README's rubric table drifted: paste render_rubrics_markdown()"
    )


def test_instructions_say_what_ends_the_episode_and_what_counts_as_the_decision() -> None:
    """#12.4: asking is allowed where the policy needs it; every task's instructions say how a question is
    scored (request_info costs 0.05 when the policy did not need it, in every task), that reaching the step
    limit ends the episode too, and what counts as the answer graded."""
    for task in TASKS.values():
        text = task.instructions
        assert "ends the episode" in text, task.id
        assert f"after {task.max_steps} steps" in text and "the episode ends" in text, task.id
        assert "request_info" in text and "0.05" in text, task.id
        assert "counts as" in text, task.id
