"""The fifth holdout: blind batch 8 (170 replies), written for issue 23's last round by an outside author who read
only a brief (``corpus/brief_batch8.md``) and the store policy (``seed_data/policy.md``) — not the reader, not
the tests, not the other corpora — and told to write as many distinct people (terse, warm, corporate,
non-native, bullets, emoji). Every entry's decision is the gold one or its accepted alternative, so each label
judges the reply alone. Sealed outside the repository until batch 7's classes were fixed, then graded once, with
that reader; its misses were then fixed by class (below).

On arrival: replies FP 5/82 (0.061), FN 6/88 (0.068), the same on the first three tickets of each case. The
reader before batch 7's class fixes would have read FP 6/82, FN 7/88: the fixes, made on new replies for batch
7's classes, carried one miss of each kind to this unseen author. The five false positives are a decline that
never declines ("let me see what I can do"), a wrong warranty length said in words ("a 6-month warranty"), blame
in hindsight ("if you'd contacted us when …"), a reply that calls the item covered and then refuses, and a
holding reply that names no team; the six false negatives are a replacement "arranged", a window reason in
non-native word order, two bulleted findings ("Return window: 30 days" / "Result: not eligible"; "Duplicate
charge: none found"), an emoji reply read as discourteous, and "a colleague on our specialist team" not read as
naming who handles the ticket.

Then its misses were examined and fixed by class, on new replies written for each class
(tests/env/test_replies_batch8_classes.py, ``b8c-*`` in the dev corpus; never this batch's sentences): a decline
left open ("let me see what we can do"), hindsight as a counterfactual ("had you told us sooner, we could
have …"), "covered by its warranty" beside its end, a holding reply that names no one who handles it (P14),
bulleted findings (a label and its value read as one; the time since delivery beside a shorter window),
"as soon as possible" read as a condition, "must be reported inside 30 days" read as the window open, an emoji
reply's close, and "the right attention" read as an item sent. The "6-month warranty" false positive is left: the
author wrote a literal length as a wrong one, but every ticket this case binds to has a 180-day (6-month)
warranty, so the reply is true where it is graded. After: FP 1/82 (0.012, b8_065), FN 0/88 on every binding.
From here on the batch is no longer unseen: these rates are a regression floor, not an accuracy; the on-arrival
numbers above remain the measurement of unseen wording.
"""

from __future__ import annotations

import pytest

from tests.env.corpus_binding import assert_within, follows_gold, load

# Measured after the class fixes (see above); deterministic readers, so the bound is the measured share itself.
REPLY_BOUNDS = {"false_positive_rate": 0.0122, "false_negative_rate": 0.0}
CASES = {
    "approve_refund",
    "approve_replacement",
    *(f"reject/{r}" for r in ("window", "final_sale", "used", "warranty", "normal_wear", "in_transit")),
    *(f"reject/{r}" for r in ("parcel_found", "not_charged_twice", "unverifiable")),
    *(f"route/{q}" for q in ("Escalations", "Fraud", "Returns", "Billing")),
}


def test_the_holdout_is_well_formed() -> None:
    entries = load("replies_holdout5.jsonl")
    assert len(entries) == 170 and len({e["id"] for e in entries}) == 170
    assert {e["case"] for e in entries} == CASES
    assert sum(e["expected"]["acceptable"] for e in entries) == 88
    assert all(follows_gold(e) for e in entries)


@pytest.mark.parametrize("nth", [0, 1, 2])
def test_reply_rates_stay_at_what_the_holdout_measured(nth: int) -> None:
    """Bound to the first ticket of each case, and to two others (other products, amounts, days)."""
    assert_within("replies_holdout5.jsonl", REPLY_BOUNDS, nth)
