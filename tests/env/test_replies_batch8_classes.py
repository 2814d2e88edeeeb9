"""The classes blind batch 8 (``replies_holdout5.jsonl``) revealed when its five false positives and six false
negatives were examined after its on-arrival grading, each fixed by class and tested on new replies written for
it (``b8c-*`` in the dev corpus, acceptable ones and near misses): none of the batch's own sentences is here, so a
rule that learnt its strings and not the class fails. The reader before these fixes read the 52 new replies FP
9/23, FN 10/29.

C1 a decline that never declines ("… but let me see what we can do"): the claim is left open. C2 a warranty
length in months written as an adjective ("a 2-month warranty") was read already: the batch's "6-month" reply is
true of the ticket it binds to (180 days), so it stays a false positive of the label, not of the reader. C3
hindsight as a counterfactual ("had you reported it sooner, we could have …") is blame. C4 "your X is covered
by its warranty" beside the warranty's end contradicts itself. C5 a holding reply names who handles the ticket
(policy P14; the routing rubric's "says the ticket is with the right team"): "we're looking into it" names no
one. C6 bulleted findings: a label and its value read as one ("- Duplicates: none"), and the time since
delivery stated beside a shorter window states the window passed. C7 "as soon as possible" is a manner, neither
a condition nor a hedge. C8 "must be reported inside 30 days" is the limit, not the window still open. C9 an
emoji reply's helpful close ("drop us a line 🙂"). C10 "the right attention" is no item sent.
"""

from __future__ import annotations

from typing import Any

import pytest

from service.env.replies import meaning
from tests.env.corpus_binding import agreement_cases, assert_agrees, assert_classes_covered, round_entries

ENTRIES = round_entries("b8c-")


def test_every_class_has_acceptable_replies_and_near_misses() -> None:
    assert_classes_covered(ENTRIES, "b8c-", [f"c{i}" for i in range(1, 11)], acceptable=2, near_misses=1)
    assert len(ENTRIES) == 52


@pytest.mark.parametrize(("entry", "nth"), agreement_cases(ENTRIES))
def test_the_reader_agrees_with_the_lead(entry: dict[str, Any], nth: int) -> None:
    assert_agrees(entry, nth)


def test_a_decline_left_open_and_hindsight() -> None:
    assert "claim" in meaning("Worn items are normally refused, but let me see what we can do.").offers
    assert "claim" not in meaning("I looked at what we can do, but we can't accept a worn item.").offers
    assert meaning("Had you told us sooner, we could have replaced it.").rude
    assert meaning("If you had sent it back in time, we would have refunded it.").rude
    assert meaning("We would have refunded it if you had returned it within the window.").rude
    assert not meaning("If you'd like, we could have it collected.").rude
    assert not meaning("If you had received it damaged, we would have replaced it.").rude  # an expectation
    assert not meaning("We couldn't have done more, sorry.").rude


def test_covered_then_ended_contradicts_itself() -> None:
    assert meaning("Your kettle is covered by its warranty.").covered
    assert meaning("This fault falls under the warranty.").covered
    assert not meaning("It was covered by a 180-day warranty.").covered
    assert not meaning("It isn't covered by the warranty any more.").covered
    assert not meaning("Faults are covered by our warranty for 180 days.").covered
    assert not meaning("Your kettle was covered by its warranty, which has now ended.").covered
    assert not meaning("Is your kettle covered by its warranty?").covered


def test_a_holding_reply_names_who_handles_it() -> None:
    assert not meaning("We're looking into it and will get back to you.").names_handler
    assert not meaning("Someone will be in touch.").names_handler
    assert meaning("Our Billing team is looking into it.").names_handler
    assert meaning("I've asked Billing to check the charges.").names_handler
    assert meaning("A colleague will reply to you.").names_handler


def test_bulleted_findings_and_layout() -> None:
    m = meaning("Order ORD-1:\n- Payments taken: one\n- Duplicates: none\n- Refund: not due")
    assert "not_charged_twice" in m.reasons
    assert "not_charged_twice" not in meaning("- Duplicate charge: under review").reasons
    m = meaning("- Parcel arrived: 92 days ago\n- Returns accepted for: 30 days")
    assert "window" in m.reasons and m.window_days == {30}
    assert (
        "window"
        not in meaning("- Parcel arrived: 12 days ago\n- Return window: 30 days").reasons
        - meaning("- Parcel arrived: 12 days ago\n- Return window: 30 days").scoped
    )
    # the window as an obligation is the limit; inside the window said of this order is the window open
    assert "window" in meaning("Returns must be sent inside 30 days, and it arrived 92 days ago.").reasons
    assert "window" not in meaning("You're comfortably inside our 30-day window.").reasons


def test_as_soon_as_possible_is_no_condition() -> None:
    assert meaning("I've arranged a new lamp and we'll ship it out as soon as possible.").grants == {"replacement"}
    assert meaning("We'll get the replacement to you as quickly as possible.").grants == {"replacement"}
    assert not meaning("If the team approves it, we'll ship a replacement as soon as possible.").grants
    assert meaning("As soon as it's back with us, we'll refund you.").grants == {"refund"}  # a condition of time


def test_emoji_closes_and_the_right_attention() -> None:
    assert meaning("Hi Yuki! 📦 Still on its way, so no refund yet. If it's late, drop us a line 🙂").courteous
    assert not meaning("Yuki 🙄 still in transit. No refund.").courteous
    assert not meaning("So it gets the right attention, I've passed it to a colleague.").grants
    assert meaning("I've passed it to a colleague who will send you a new one this week.").grants == {"replacement"}
