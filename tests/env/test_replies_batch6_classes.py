"""The classes blind batch 6 (``replies_holdout3.jsonl``) revealed when it was examined after its on-arrival
grading, each fixed by class and tested on new replies written for it (``b6c-*`` in the dev corpus): none
of the batch's own sentences is here, so a rule that learnt its strings and not the class fails.

F1 expected eligibility ("should qualify for a refund") decides nothing; F2 an exception floated ("let me
check whether we can make an exception") leaves the decision open; F3 blame in a generalisation with no
actor ("marks like these appear when a mat isn't looked after") is rude; F4 a remedy promised if the parcel
is late by a date contradicts a denial; F5 the count of parcels reported missing and notes on the account
leak; F6 "whatever" before a noun phrase is not dismissive; F7 the warranty's end said in the next
sentence ("That period has now ended") is the warranty reason; F8 warm openers ("Good news", "Great that it
turned up") are courteous; F9 "No" answering the reply's own question is no scoff; F11 a charge that
shows up on a statement is no parcel found; F12 a holding reply that states a finding settling the claim
("you were charged just once") decides it (F8's warm openers exposed this in the dev corpus: blind1-b158).
"""

from __future__ import annotations

from typing import Any

import pytest

from service.env.replies import meaning
from tests.env.corpus_binding import agreement_cases, assert_agrees, round_entries

ENTRIES = round_entries("b6c-")


@pytest.mark.parametrize(("entry", "nth"), agreement_cases(ENTRIES))
def test_the_reader_agrees_with_the_lead(entry: dict[str, Any], nth: int) -> None:
    assert_agrees(entry, nth)


def test_open_exceptions_and_deadline_promises_are_read() -> None:
    assert "claim" in meaning("Let me check whether we can make an exception.").offers
    assert "claim" not in meaning("We can't make an exception, sorry.").offers
    assert meaning("If it hasn't arrived by Friday, we'll refund you.").promised_if == {"refund"}
    assert not meaning("If the team approves it by Friday, we'll refund you.").promised_if
    assert not meaning("If it hasn't arrived by Friday, please reply and we'll look into it.").promised_if


def test_anaphora_and_answers() -> None:
    m = meaning("It came with a 90-day warranty. That period has now ended, so we can't replace it.")
    assert "warranty" in m.reasons
    assert meaning("Was it lost? No - it's still in transit.").rude == ()
    assert meaning("No. It has been used.").rude
    assert "parcel_found" not in meaning("A pending charge sometimes shows up on statements.").reasons
