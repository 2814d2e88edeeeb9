"""The classes blind batch 7 (``replies_holdout4.jsonl``) revealed when its nine false negatives were examined
after its on-arrival grading, each fixed by class and tested on new replies written for it (``b7c-*`` in the
dev corpus, acceptable ones and near misses): none of the batch's own sentences is here, so a rule that learnt
its strings and not the class fails. The reader before these fixes read the 39 new replies FP 0/16, FN 20/23.

C1 this order's days counted ("which comes to 92 days here") or the customer's contact dated ("your report
came in 369 days after delivery") is the time since delivery, never a window or warranty length — and is
checked as one; "after the first 30 days" before the warranty is the return window. C2 a rule's only trigger
("we only treat a parcel as lost when the carrier reports it lost") asserts nothing of this order, nor does a
rule said not to apply ("neither is the case here") or a check made with the carrier ("we checked your order
with the carrier"). C3 "claims like yours" naming what a team handles ("requests like yours are handled by our
Returns team") is routing, not suspicion; "the right people for this" is no new item. C4 use said with an
adverb inside the verb group ("the shoes was already used"). C5 a terse report with its subject left out
("order X: refunded $370.99 for the lamp") grants the remedy.
"""

from __future__ import annotations

from typing import Any

import pytest

from service.env.replies import meaning
from tests.env.corpus_binding import agreement_cases, assert_agrees, assert_classes_covered, round_entries

ENTRIES = round_entries("b7c-")


def test_every_class_has_acceptable_replies_and_near_misses() -> None:
    assert_classes_covered(ENTRIES, "b7c-", ["c1", "c2", "c3", "c4", "c5"], acceptable=4, near_misses=2)


@pytest.mark.parametrize(("entry", "nth"), agreement_cases(ENTRIES))
def test_the_reader_agrees_with_the_lead(entry: dict[str, Any], nth: int) -> None:
    assert_agrees(entry, nth)


def test_a_day_count_of_this_order_is_no_limit() -> None:
    m = meaning("Counting from delivery to your email, that adds up to 92 days, past our 30-day return window.")
    assert m.window_days == {30} and (92, "exact") in m.elapsed
    m = meaning("Your claim reached us 369 days after the lamp was delivered, and its warranty lasts 6 months.")
    assert m.warranty_days == {182} and (369, "exact") in m.elapsed
    assert meaning("You got in touch 92 days after delivery; returns close after 30 days.").window_days == {30}
    # a real limit still counts, however it is dated
    assert meaning("Returns must be made within 14 days of delivery.").window_days == {14}
    assert meaning("The warranty ended 90 days after delivery.").warranty_days == {90}
    # the first days before the warranty are the window
    m = meaning("After the first 30 days, faults are handled under the warranty.")
    assert m.window_days == {30} and not m.warranty_days
    assert meaning("Our warranty only covers the first 90 days after delivery.").warranty_days == {90}


def test_a_rules_trigger_is_not_asserted() -> None:
    assert "lost" not in meaning("We only refund a parcel as lost when the courier has lost it.").reasons
    assert "lost" not in meaning("Parcels count as lost when the carrier loses them; neither applies here.").reasons
    assert "lost" in meaning("We only found out when the carrier told us: your parcel was lost in transit.").reasons
    assert "lost" in meaning("The carrier has lost your parcel, so we can't refund it.").reasons
    # "once" as a count is no condition: "billed only once" still asserts a single charge
    assert "not_charged_twice" in meaning("We only billed you once for this order.").reasons
    assert "in_transit" not in meaning("I checked your order with the carrier and in our system.").reasons
    assert "in_transit" in meaning("Your parcel is still with the carrier and not late yet.").reasons


def test_claims_like_yours_that_a_team_handles_are_no_insinuation() -> None:
    assert not meaning("Requests like yours are handled by our Returns team.").rude
    assert not meaning("I've sent it to the specialists who deal with claims of this kind.").rude
    assert not meaning("Cases like yours go straight to our Billing team.").rude
    assert meaning("We have to look twice at claims like yours.").rude
    assert meaning("We review claims like yours very carefully, as you can imagine.").rude
    assert meaning("We have to be careful with requests like yours, so it's with our Returns team.").rude
    assert not meaning("They're the right people for this and will be in touch with you soon.").grants
    assert meaning("They're the right people for this and will send you a new one this week.").grants == {"replacement"}


def test_use_and_terse_approvals_are_read() -> None:
    assert "used" in meaning("The jacket was already worn, so the return is not possible.").reasons
    assert "used" not in meaning("It was already unused when it arrived, we are told.").reasons
    assert "used" not in meaning("It hasn't already been used, has it?").reasons
    assert meaning("Order ORD-1: refunded $40.00 for the lamp.").grants == {"refund"}
    assert meaning("Replaced free of charge.").grants == {"replacement"}
    assert not meaning("Refunded items are final sale.").grants
    assert not meaning("Refunded? Not yet.").grants
    assert not meaning("Not refunded yet.").grants
