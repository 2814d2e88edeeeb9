"""Three classes the reader misread on a corpus nobody here had seen (issue 23), each tested on new
paraphrases written for it (``i23-*`` in the dev corpus), beside near misses that must still fail:

* a refund given because the replacement is out of stock is no contradiction: refusing the replacement
  and granting the refund refuse and grant different things (saying no to the refund itself, or to the
  claim, and refunding still contradicts);
* stating a rule's true scope ("returns within 30 days … only for unused items", "used items can't be
  returned") is not a false reason: a reason named only of returns or items in general is no claim
  about this order (saying this order is past the window still is);
* a reply that blames customers in a generalisation ("that happens when people don't pay attention") or
  brushes the customer off ("whenever they get round to it") is not courteous.
"""

from __future__ import annotations

from typing import Any

import pytest

from service.env.replies import meaning
from tests.env.corpus_binding import agreement_cases, assert_agrees, assert_classes_covered, round_entries

ENTRIES = round_entries("i23-")


def test_each_class_has_paraphrases_and_near_misses() -> None:
    assert_classes_covered(ENTRIES, "i23-", ["a", "b", "c"], acceptable=3, near_misses=3)


@pytest.mark.parametrize(("entry", "nth"), agreement_cases(ENTRIES))
def test_the_reader_agrees_with_the_lead(entry: dict[str, Any], nth: int) -> None:
    assert_agrees(entry, nth)


def test_what_a_refusal_refuses() -> None:
    m = meaning("The lamp is sold out, so we can't send a replacement - I've refunded you instead.")
    assert m.refuses and m.refused == {"replacement"} and m.grants == {"refund"}
    # a refusal that names no remedy refuses what its sentence named, or the claim itself
    assert meaning("We'd usually send a new one, but stock has run out, so we can't send one.").refused == {
        "replacement"
    }
    assert meaning("Sorry, we can't accept this.").refused == {"claim"}


def test_a_rule_stated_in_general_is_scope_not_a_claim_about_the_order() -> None:
    m = meaning("We accept returns within 30 days, and only for unused items.")
    assert m.scoped == {"window"} and not m.facts
    m = meaning("Used items can't be returned.")
    assert m.scoped == {"used"} and not m.facts
    for about_this_order in ("Your return is outside our 30-day window.", "It's been used, so we can't take it back."):
        assert not meaning(about_this_order).scoped, about_this_order


def test_generalised_blame_and_brush_offs_are_rude() -> None:
    for rude in (
        "That happens when people don't pay attention to the size guide.",
        "Most breakages happen if you don't read the manual.",
        "They'll get to your claim whenever they get round to it.",
    ):
        assert meaning(rude).rude, rude
    for kind in (
        "Delays happen when the courier doesn't check the address.",
        "This can happen when a payment is retried by your bank.",
        "They'll get back to you as soon as they can.",
    ):
        assert meaning(kind).rude == (), kind
