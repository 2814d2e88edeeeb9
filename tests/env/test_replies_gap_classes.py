"""Three reader gaps noticed (not graded) while blind batch 8's classes were fixed, each fixed by class and tested
on new replies written for it (``gap-*`` in the dev corpus: acceptable ones and a near miss per class). Every
one is a false negative: a correct reply the reader refused. The reader before these fixes read the nine
replies FP 0/3, FN 5/6.

C1 a return dated from delivery ("it would be returned 92 days after delivery", "you sent it back 92 days after
delivery") is this order's elapsed time, like a contact dated from delivery, never a return window. C2 an order
reference inside a remedy's report ("refund for your order ORD-83677752 is done") is one word, so a phrase's gap
counts it once. C3 "the right person" names who handles a holding reply, and the handover holds.
"""

from __future__ import annotations

from typing import Any

import pytest

from service.env.language import words
from service.env.replies import meaning
from tests.env.corpus_binding import agreement_cases, assert_agrees, assert_classes_covered, round_entries

ENTRIES = round_entries("gap-")


def test_every_class_has_acceptable_replies_and_a_near_miss() -> None:
    assert_classes_covered(ENTRIES, "gap-", ["c1", "c2", "c3"], acceptable=2, near_misses=1)
    assert len(ENTRIES) == 9


@pytest.mark.parametrize(("entry", "nth"), agreement_cases(ENTRIES))
def test_the_reader_agrees_with_the_lead(entry: dict[str, Any], nth: int) -> None:
    assert_agrees(entry, nth)


def test_a_return_dated_from_delivery_is_elapsed_time_not_a_window() -> None:
    for reply in (
        "It was returned 92 days after delivery, and returns are accepted for 30 days.",
        "Your table lamp would be returned 92 days after delivery; the window is 30 days.",
        "You sent the lamp back 92 days after delivery, past our 30-day window.",
        "You returned it 92 days after delivery, and our window is 30 days.",
    ):
        m = meaning(reply)
        assert m.window_days == {30} and "window" in m.reasons, reply
    # a rule about returns still states its window, right or wrong
    assert meaning("Items must be returned within 14 days of delivery.").window_days == {14}
    assert meaning("Items returned more than 14 days after delivery can't be refunded.").window_days == {14}
    assert meaning("Items can be returned up to 14 days after delivery.").window_days == {14}


def test_an_order_reference_is_one_word() -> None:
    assert words("refund for order ord-83677752") == ["refund", "for", "order", "ord-83677752"]
    assert words("a 30-day window, well-packed") == ["a", "30", "day", "window", "well", "packed"]
    assert meaning("Refund for your order ORD-83677752 is done ✅").grants == {"refund"}
    assert meaning("The replacement for your order ORD-83677752 is done.").grants == {"replacement"}
    assert not meaning("The refund for your order ORD-83677752 is not done yet.").grants


def test_the_right_person_names_who_handles_it() -> None:
    m = meaning("I've made sure it reaches the right person.")
    assert m.holds and m.names_handler
    assert meaning("I've made sure this gets to the right person here, who will reply.").names_handler
    assert not meaning("Someone will get back to you at some point.").names_handler
