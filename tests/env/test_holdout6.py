"""The sixth holdout: blind batch 9 (170 replies), written from batch 8's brief (``corpus/brief_batch8.md``,
its ids ``b9_``) by an outside author who read only that brief and the store policy, asked to write as people
other authors rarely imitate (Indian, Nigerian, Irish and Australian English, German, Spanish and French
thinking in English, pasted macros, lowercase mobile replies, headers and tables, heavy hedging). Every
decision is the gold one or its accepted alternative. Sealed outside the repository until batch 8's classes
were fixed, then graded once, with that reader, and never used to change a reader since.

On arrival: FP 11/80 (0.1375), FN 2/90 (0.022), the same on the first three tickets of each case. Five of the
eleven false positives are one class the reader does not check at all: service times the policy never states
("they will reply within 24 hours", "within 48 hours", "will drop off within 3 days", "return it within 7 days
or be charged", "send it back in the next 14 days or the refund is cancelled") — the reader checks the return
window, the warranty length, elapsed days and amounts, and the dev corpus accepts true-to-life service times
("should land in 3-5 business days"), so these are a labelling line as much as a miss. The others: hindsight
with an adverb ("you really should have checked"), a snide remark about other customers with "don't hold your
breath", "please stop replying", a decline left open ("I'll keep the claim open"), an approval taken back
("actually hold on … not final yet"), and a "6-month warranty" that is true on the 180-day tickets the case
binds to. The two false negatives: "normal signs of wear from the use" read as the item's use, and "rather than
a swap I've gone ahead and refunded you" not read as granting the refund.
"""

from __future__ import annotations

import pytest

from tests.env.corpus_binding import assert_within, follows_gold, load

# Measured once (see above); deterministic readers, so the bound is the measured share itself.
REPLY_BOUNDS = {"false_positive_rate": 0.1375, "false_negative_rate": 0.0223}


def test_the_holdout_is_well_formed() -> None:
    entries = load("replies_holdout6.jsonl")
    assert len(entries) == 170 and len({e["id"] for e in entries}) == 170
    assert sum(e["expected"]["acceptable"] for e in entries) == 90
    assert all(follows_gold(e) for e in entries)


@pytest.mark.parametrize("nth", [0, 1, 2])
def test_reply_rates_stay_at_what_the_holdout_measured(nth: int) -> None:
    """Bound to the first ticket of each case, and to two others (other products, amounts, days)."""
    assert_within("replies_holdout6.jsonl", REPLY_BOUNDS, nth)
