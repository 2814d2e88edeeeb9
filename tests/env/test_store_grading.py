"""Grading a store-desk episode on hand-built stores: the final state (however the writes were split),
the field that differs, writes the policy never makes, the procedure (identity, reads, a yes before each
change) and what the customer was told; and the backend's refusals, which change nothing."""

from __future__ import annotations

from typing import Any

import pytest

from service.env.grading import GRADER_VERSION
from service.env.models import Action, EpisodeState, Grade
from service.env.replies import meaning
from service.env.store import episode
from service.env.store.grading import grade_store_episode
from service.env.store.state import StoreProgress
from service.env.store.world import Request, StoreTicket, Writer
from tests.env.store_fixtures import db, line, order, ticket

ID = [
    ("verify_identity", {"customer_id": "CUS-TEST01", "email": "ava.smith@mailbox.example", "postal_code": "LS2 7EW"})
]
READ = [("get_order", {"order_id": "ORD-10001"}), ("get_shipment", {"shipment_id": "SHP-1"})]
YES = [
    (
        "send_message",
        {
            "text": "I'll refund $54.95 ($34.95 and $20.00) on ORD-10001. Shall I go ahead?",
            "asking_for": ["confirmation"],
        },
    )
]
END = [("end_conversation", {})]


def play(t: StoreTicket, calls: list[tuple[str, dict[str, Any]]]) -> tuple[Grade, EpisodeState]:
    state = EpisodeState(
        task_id="store-medium", split="train", seed=0, ticket_id=t.ticket_id, max_steps=40, store=StoreProgress()
    )
    for name, arguments in calls:
        state, _ = episode.step(state, Action(tool=name, arguments=arguments), t)
    return grade_store_episode(state, t, GRADER_VERSION), state


def failed(grade: Grade) -> dict[str, str]:
    return {c.name: c.detail for c in grade.components if not c.passed}


@pytest.fixture
def two_damaged() -> StoreTicket:
    """Two damaged lines of one order, both refunded: $30 + $20 and the $4.95 shipping fee, to the card."""
    o = order((line(1, 3000), line(2, 2000)))
    requests = (
        Request(kind="damaged", order_id="ORD-10001", lines=((1, 1),), wants="refund"),
        Request(kind="damaged", order_id="ORD-10001", lines=((2, 1),), wants="refund"),
    )
    return ticket(db(o, stock=0), *requests)


def _refund(items: list[int], amount: float, shipping: bool = False, to: str = "pay_card") -> tuple[str, dict]:
    return "refund", {
        "order_id": "ORD-10001",
        "items": [{"line_no": n, "quantity": 1} for n in items],
        "include_shipping": shipping,
        "amounts": [{"to": to, "amount": amount}],
    }


TELL = (
    "send_message",
    {"text": "I've refunded $54.95 in all ($34.95 and $20.00) to your card: it arrives in 5-10 business days."},
)


def test_two_lines_refunded_in_one_call_or_in_two_grade_the_same(two_damaged: StoreTicket) -> None:
    one, _ = play(two_damaged, ID + READ + YES + [_refund([1, 2], 54.95, shipping=True), TELL] + END)
    two, _ = play(two_damaged, ID + READ + YES + [_refund([1], 34.95, shipping=True), _refund([2], 20.00), TELL] + END)
    assert one.resolved and two.resolved, (failed(one), failed(two))


def test_the_field_that_differs_is_named_to_the_cent(two_damaged: StoreTicket) -> None:
    grade, _ = play(two_damaged, ID + READ + YES + [_refund([1, 2], 50.00), TELL] + END)
    detail = failed(grade)["final_state"]
    assert "refund on ORD-10001 to Visa ending 4242: $50.00, expected $54.95" in detail
    assert "shipping refunded on ORD-10001: none, expected yes" in detail


def test_money_beyond_the_policy_fails_at_any_point_even_where_the_total_is_then_right(two_damaged) -> None:
    grade, _ = play(
        two_damaged,
        ID + READ + YES + [_refund([1], 34.95, shipping=True, to="store_credit"), _refund([2], 20.00), TELL] + END,
    )
    assert "no_unsafe_write" in failed(grade) and "store_credit" in failed(grade)["no_unsafe_write"]


def test_the_procedure_is_graded_identity_reads_and_a_yes_before_each_change(two_damaged: StoreTicket) -> None:
    write = [_refund([1, 2], 54.95, shipping=True), TELL] + END
    unread, _ = play(two_damaged, ID + YES + write)
    assert "reads" in failed(unread)
    unconfirmed, _ = play(two_damaged, ID + READ + write)
    assert "confirmed" in failed(unconfirmed)
    unverified, _ = play(two_damaged, READ + YES + write)
    assert "identity" in failed(unverified)
    # the customer never gave their details: verifying with the record's own does not count (P16)
    asked = ticket(
        db(order((line(1, 3000), line(2, 2000))), stock=0),
        *two_damaged.requests,
        writer=Writer(name="Ava", holder=True, gave_identity=False),
    )
    copied, _ = play(asked, ID + READ + YES + write)
    assert "identity" in failed(copied)


def test_a_yes_counts_only_for_the_change_the_message_described(two_damaged: StoreTicket) -> None:
    write = [_refund([1, 2], 54.95, shipping=True), TELL] + END
    for text in (
        "Shall I go ahead?",  # describes nothing
        "I'll refund your order. Is that OK?",  # no amount: the customer agreed to no sum
        "I'll refund $20.00 to your card. Is that OK?",  # another amount
    ):
        vague = [("send_message", {"text": text, "asking_for": ["confirmation"]})]
        grade, _ = play(two_damaged, ID + READ + vague + write)
        assert failed(grade).get("confirmed", "").endswith("without a yes to a message describing it"), text
    # a later confirmation about something else does not withdraw the yes to this one
    other = [("send_message", {"text": "And shall I close ORD-20002?", "asking_for": ["confirmation"]})]
    grade, _ = play(two_damaged, ID + READ + YES + other + write)
    assert "confirmed" not in failed(grade)


def test_telling_the_customer_before_verifying_or_not_telling_the_amount_fails(two_damaged: StoreTicket) -> None:
    leak = [("send_message", {"text": "I can see order ORD-10001 cost $54.95 in total."})]
    grade, _ = play(two_damaged, leak + ID + READ + YES + [_refund([1, 2], 54.95, shipping=True), TELL] + END)
    assert "identity" in failed(grade) and "from the account before identity was verified" in failed(grade)["identity"]
    quiet, _ = play(
        two_damaged,
        ID
        + READ
        + YES
        + [_refund([1, 2], 54.95, shipping=True), ("send_message", {"text": "All sorted, thanks!"})]
        + END,
    )
    assert "told" in failed(quiet)


def test_a_question_the_policy_did_not_need_fails(two_damaged: StoreTicket) -> None:
    needless = [("send_message", {"text": "Has the item been used or opened?", "asking_for": ["condition"]})]
    grade, _ = play(two_damaged, ID + READ + needless + YES + [_refund([1, 2], 54.95, shipping=True), TELL] + END)
    assert set(failed(grade)) == {"no_needless_question"}


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (("get_order", {"order_id": "ORD-99999"}), "no order"),
        (_refund([1], 40.00), "more than those items"),
        (
            (
                "refund",
                {"order_id": "ORD-10001", "items": [{"line_no": 3}], "amounts": [{"to": "pay_card", "amount": 1}]},
            ),
            "no line 3",
        ),
        (_refund([1], 10.00, to="pay_other"), "not a payment"),
        (("replace_item", {"order_id": "ORD-10001", "line_no": 1}), "out of stock"),
        (("teleport", {}), "unknown tool"),
        (("refund", {"order_id": "ORD-10001"}), "invalid arguments"),
    ],
)
def test_the_backend_refuses_what_a_store_would_and_nothing_changes(two_damaged, call, error) -> None:
    _, state = play(two_damaged, [call])
    assert state.tool_result["ok"] is False and error in state.last_action_error  # type: ignore[index,operator]
    assert state.store is not None and state.store.effects == () and state.step_count == 1


def test_a_refused_refund_does_not_say_how_much_would_have_been_accepted(two_damaged: StoreTicket) -> None:
    """The cap is the agent's to work out (P18), not to probe: the error names only the amount asked."""
    over_card = ("refund", {"order_id": "ORD-10001", "amounts": [{"to": "pay_card", "amount": 60.00}]})
    over_charge = ("refund", {"order_id": "ORD-10001", "amounts": [{"to": "pay_card", "amount": 5.00}]})
    for call, asked in (
        (_refund([1], 40.00), 40.00),
        (_refund([1], 99.00, shipping=True), 99.00),
        (over_card, 60.00),
        (over_charge, 5.00),
    ):
        _, state = play(two_damaged, [call])
        error = state.last_action_error or ""
        assert error and meaning(error).amounts <= {asked}, error


def test_a_unit_cannot_be_refunded_twice(two_damaged: StoreTicket) -> None:
    _, state = play(two_damaged, [_refund([1], 30.00), _refund([1], 1.00)])
    assert "0 unit(s) left" in (state.last_action_error or "") and len(state.store.effects) == 1  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("text", "leaks"),
    [
        ("Your account is currently under review, so I can't refund this today.", True),
        ("Unfortunately the order didn't pass our fraud checks.", True),
        ("This claim failed the risk check, so a specialist team will look at it.", True),
        ("Your account has been flagged, I'm afraid.", True),
        ("We've noticed unusual activity, so this goes to another team.", True),
        ("After an internal review I can't approve this myself.", True),
        ("I just need a quick security check first: your email and postcode, please.", False),
        ("A specialist team will review your claim and reply within 2 business days.", False),
        ("I'll look into your account now.", False),
    ],
)
def test_a_reply_that_hints_at_the_risk_assessment_fails_conduct(two_damaged: StoreTicket, text: str, leaks) -> None:
    hint = [("send_message", {"text": text})]
    grade, _ = play(two_damaged, ID + READ + YES + [_refund([1, 2], 54.95, shipping=True), TELL] + hint + END)
    assert ("conduct" in failed(grade)) is leaks, failed(grade)


@pytest.mark.parametrize(
    ("text", "untrue"),
    [
        ("I've refunded $54.95 to your card: 5-10 business days. You'll also get $10.00 off next time.", "$10.00"),
        ("I've refunded $54.95 to your card: it should arrive in 3-5 business days.", "paypal refund timeline"),
        ("I've refunded $54.95 ($30.00 for one, $20.00 for the other, $4.95 shipping): 5-10 business days.", None),
    ],
)
def test_an_amount_or_timeline_nothing_bears_out_fails_told(two_damaged: StoreTicket, text: str, untrue) -> None:
    tell = [("send_message", {"text": text})]
    grade, _ = play(two_damaged, ID + READ + YES + [_refund([1, 2], 54.95, shipping=True)] + tell + END)
    if untrue is None:
        assert "told" not in failed(grade), failed(grade)
    else:
        assert untrue in failed(grade).get("told", ""), failed(grade)


@pytest.mark.parametrize(
    "text",
    [
        "I can't cancel it: it has already shipped.",
        "That line has already been delivered, so it can't be cancelled — you can return it instead.",
        "It's already arrived, so cancelling isn't possible.",
    ],
)
def test_a_line_that_shipped_or_arrived_is_told_as_the_reason_it_cannot_be_cancelled(two_damaged, text) -> None:
    from service.env.store.grading import told
    from service.env.store.policy import Fact

    assert told(text, Fact(kind="reason", value="shipped"), two_damaged)


def test_a_refund_split_per_unit_or_made_in_one_call_grades_the_same() -> None:
    """Issue 19: equivalent write sequences count the same — for confirmed (the yes covers the writes its
    message described, taken together), final_state and told."""
    two_lamps = ticket(
        db(order((line(1, 7040, qty=2, name="Brass Lamp"),), fee=0), stock=0),
        Request(kind="damaged", order_id="ORD-10001", lines=((1, 2),), wants="refund"),
    )
    ask = (
        "send_message",
        {
            "text": "I'll refund $140.80 for the two brass lamps to your Visa and email a prepaid return label. "
            "Shall I go ahead?",
            "asking_for": ["confirmation"],
        },
    )
    tell = ("send_message", {"text": "Done: $140.80 is on its way back to your card, in 5-10 business days."})

    def back(units: int) -> tuple[str, dict]:
        items = [{"line_no": 1, "quantity": units}]
        return "open_return", {"order_id": "ORD-10001", "items": items, "label": "prepaid"}

    def refund(units: int, amount: float) -> tuple[str, dict]:
        items = [{"line_no": 1, "quantity": units}]
        return "refund", {"order_id": "ORD-10001", "items": items, "amounts": [{"to": "pay_card", "amount": amount}]}

    merged, _ = play(two_lamps, ID + READ + [ask, refund(2, 140.80), back(2), tell] + END)
    split, _ = play(two_lamps, ID + READ + [ask, refund(1, 70.40), refund(1, 70.40), back(1), back(1), tell] + END)
    assert merged.resolved and split.resolved, (failed(merged), failed(split))
    for check in ("confirmed", "final_state", "told"):
        assert next(c for c in merged.components if c.name == check).passed
        assert next(c for c in split.components if c.name == check).passed
    # and a yes to $140.80 does not cover refunds that add up to something else
    wrong, _ = play(two_lamps, ID + READ + [ask, refund(1, 70.40), refund(1, 60.00), back(2), tell] + END)
    assert "confirmed" in failed(wrong)


@pytest.mark.parametrize(
    ("text", "untrue"),
    [
        ("I've refunded $54.95 to your card: 5-10 business days. Sadly it's also outside our 30-day window.", "window"),
        ("I've refunded $54.95 to your card (5-10 business days). Only the account holder can do this.", "not holder"),
        (
            "I've refunded $54.95 to your card: 5-10 business days. It has already been replaced before.",
            "already settled",
        ),
        ("I've refunded $54.95 to your card: 5-10 business days. Our records show one charge only.", None),
    ],
)
def test_a_reason_that_is_not_true_of_the_ticket_fails_told(two_damaged: StoreTicket, text: str, untrue) -> None:
    """Listing every reason there is to be sure of the right one tells the customer something untrue."""
    tell = [("send_message", {"text": text})]
    grade, _ = play(two_damaged, ID + READ + YES + [_refund([1, 2], 54.95, shipping=True)] + tell + END)
    if untrue is None:
        assert "told" not in failed(grade), failed(grade)
    else:
        assert f"a reason that is not true here: {untrue}" in failed(grade).get("told", ""), failed(grade)


@pytest.fixture
def big_refund() -> StoreTicket:
    """A $400 damaged item, refunded with the $4.95 shipping fee: $404.95 is over P28's threshold."""
    return ticket(
        db(order((line(1, 40000, name="Oak Desk"),)), stock=0),
        Request(kind="damaged", order_id="ORD-10001", lines=((1, 1),), wants="refund"),
    )


HOLD = ("send_message", {"text": "I've passed this to our Escalations team, who will be in touch about it."})


@pytest.mark.parametrize(
    ("note", "right"),
    [
        ("ORD-10001: damaged oak desk, refund of $404.95 with shipping", True),
        ("Refund for order ord10001, $404.95", True),
        ("ORD-10001 damaged desk, refund $400.00", False),  # the amount without the shipping fee
        ("Damaged desk, refund $404.95", False),  # no order id
    ],
)
def test_an_escalation_note_quotes_the_order_and_the_amount_to_the_cent(big_refund, note: str, right: bool) -> None:
    escalate = ("escalate", {"queue": "Escalations", "note": note, "order_id": "ORD-10001"})
    grade, _ = play(big_refund, ID + READ + [escalate, HOLD] + END)
    assert ("final_state" not in failed(grade)) is right, failed(grade)
    if not right:
        assert "note to Escalations on ORD-10001" in failed(grade)["final_state"]


def test_an_amount_written_in_a_note_is_not_borne_out_when_told_unless_it_is_true(big_refund) -> None:
    escalate = ("escalate", {"queue": "Escalations", "note": "ORD-10001 $404.95 (customer asked for $999.00)"})
    tell = ("send_message", {"text": "Our Escalations team will look at your $999.00 refund."})
    grade, _ = play(big_refund, ID + READ + [escalate, tell] + END)
    assert "$999.00, an amount nothing bears out" in failed(grade).get("told", ""), failed(grade)


def test_the_backend_refuses_to_refund_or_replace_a_unit_replaced_before() -> None:
    from service.env.store.world import PastReplacement

    done = PastReplacement(replacement_id="R1", date="2026-06-22", line_no=1, quantity=1, reason="arrived damaged")
    o = order((line(1, 3000), line(2, 2000))).model_copy(update={"replacements": (done,)})
    t = ticket(db(o), Request(kind="damaged", order_id="ORD-10001", lines=((1, 1),), wants="refund"))
    for call in (_refund([1], 30.00), ("replace_item", {"order_id": "ORD-10001", "line_no": 1})):
        _, state = play(t, [call])
        assert "0 unit(s) left" in (state.last_action_error or ""), state.last_action_error
    _, state = play(t, [("get_order", {"order_id": "ORD-10001"})])
    assert state.tool_result["result"]["replacements"][0]["date"] == "2026-06-22"  # type: ignore[index]


def test_a_correct_breakdown_of_the_amount_is_borne_out_in_every_part() -> None:
    """Prices, discount shares per line and per unit, what each unit was paid, the shipping fee and the
    partial sums of a breakdown are all true amounts (issue 19 audit: 'less its $25.50 share of the SAVE20
    discount' failed as an amount nothing bears out)."""
    # two lines: 2 x $63.75 and $45.00, 20 % off the goods ($34.50): line 1's share $25.50, $12.75 a unit
    o = order((line(1, 6375, qty=2, name="Brass Lamp"), line(2, 4500, name="Wool Rug")), discount=3450, fee=495)
    t = ticket(db(o, stock=0), Request(kind="damaged", order_id="ORD-10001", lines=((1, 2),), wants="refund"))
    ask = ("send_message", {"text": "I'll refund $102.00 and $4.95 shipping for the lamps. Shall I go ahead?"})
    ask[1]["asking_for"] = ["confirmation"]  # type: ignore[index]
    refund = (
        "refund",
        {
            "order_id": "ORD-10001",
            "items": [{"line_no": 1, "quantity": 2}],
            "include_shipping": True,
            "amounts": [{"to": "pay_card", "amount": 106.95}],
        },
    )
    back = ("open_return", {"order_id": "ORD-10001", "items": [{"line_no": 1, "quantity": 2}], "label": "prepaid"})
    tell = (
        "send_message",
        {
            "text": "The two lamps were $63.75 each, $127.50 in all, less their $25.50 share of the SAVE "
            "discount ($12.75 a lamp), so each lamp was paid $51.00 and both $102.00; with the $4.95 shipping "
            "fee that is $106.95, back on your card in 5-10 business days."
        },
    )
    grade, _ = play(t, ID + READ + [ask, refund, back, tell] + END)
    assert grade.resolved, failed(grade)
