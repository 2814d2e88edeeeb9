"""The store desk reads what the agent tells the customer on meaning: refusal reasons, refund timelines and
amounts in the wordings support agents use (``tests/env/store_phrasings.py``), negation included — and a
reason that is not true of the ticket is something untrue told."""

from __future__ import annotations

import pytest

from service.env.store.grading import told
from service.env.store.policy import STORE_REASONS, Fact
from service.env.store.reading import asserted_reasons, stated_reasons
from service.env.store.world import Request
from tests.env.store_fixtures import db, line, order, ticket
from tests.env.store_phrasings import BLIND, BLIND_LATER, OUTCOMES, TUNED

TICKET = ticket(
    db(order((line(1, 3000),))), Request(kind="damaged", order_id="ORD-10001", lines=((1, 1),), wants="refund")
)


def _fact(cls: str) -> Fact:
    kind, _, value = cls.partition(":")
    if kind in ("timeline", "amount"):
        return Fact(kind=kind, value=value)  # type: ignore[arg-type]
    return Fact(kind="reason", value=cls)


def _cases(bank: dict[str, dict[str, tuple[str, ...]]]) -> list[tuple[str, str, bool]]:
    return [
        (cls, s, says)
        for cls, d in bank.items()
        for says in (True, False)
        for s in d.get("says" if says else "not", ())
    ]


def accuracy(bank: dict[str, dict[str, tuple[str, ...]]]) -> tuple[int, int, list[tuple[str, str, bool]]]:
    """(right, all, the misses) of the store's reading on a phrasing bank."""
    cases = _cases(bank)
    misses = [(cls, s, says) for cls, s, says in cases if told(s, _fact(cls), TICKET) != says]
    return len(cases) - len(misses), len(cases), misses


def test_every_reason_has_wordings_in_both_sets() -> None:
    assert set(STORE_REASONS) <= set(TUNED) and set(STORE_REASONS) <= set(BLIND)


@pytest.mark.parametrize(("cls", "text", "says"), _cases(TUNED))
def test_the_wordings_the_reader_was_fitted_on_are_read_right(cls: str, text: str, says: bool) -> None:
    assert told(text, _fact(cls), TICKET) == says


@pytest.mark.parametrize("bank", [BLIND, BLIND_LATER], ids=["blind", "blind-later"])
def test_wordings_nobody_fitted_the_reader_to_are_read_right_nineteen_times_in_twenty(bank) -> None:
    """The blind sets: the first written before the reader was changed (it read 57 of 76 then, 76 after),
    the second after, and measured once (23 of 23)."""
    right, total, misses = accuracy(bank)
    assert right / total >= 0.95, misses


def test_a_bare_refusal_to_approve_tells_p7s_reason_but_asserts_no_fact() -> None:
    text = "I'm sorry, but I can't approve this claim."
    assert "unverifiable" in stated_reasons(text) and "unverifiable" not in asserted_reasons(text)


@pytest.mark.parametrize("text", OUTCOMES)
def test_granting_holding_and_asking_assert_no_refusal_reason_beyond_the_refund_rule(text: str) -> None:
    """'The refund goes back to the card you paid with' states P21's rule (true of every refund); nothing
    else here is a refusal reason."""
    assert asserted_reasons(text) <= {"original_payment"}, (text, asserted_reasons(text))
