"""The fourth holdout: blind batch 7 (163 replies, 64 questions), written by a second outside author at the
same time as batch 6, from the same brief but told to write as several distinct people (a non-native
speaker, a corporate voice, emoji, fragments, numbered steps). Sealed until the reader's work for issue 23
was done, then graded once, with the final reader, and never used to change a reader since.

Conversion, the same as batch 6's (``test_holdout3.py``): question topics "condition" are the customer's
"usage", and "order" is no topic of the scripted customer (``author_topics`` keeps the original). No
routing reply needed batch 6's order-id relabelling.

On arrival: replies FP 13/83 (0.157), FN 9/80 (0.113), the same bound to the first three tickets of each
case; questions 54/64 (0.844). Ten of the thirteen false positives are replies that faithfully state a
*wrong* decision (a refund the window forbids, a replacement for a parcel that was found): the author's
rule 7 labels them unacceptable for the decision, while the reply checks judge a reply against the agent's
own decision — as the dev corpus labels such replies — and the decision check fails those episodes. On
the 151 entries whose decision is the gold or its accepted alternative: FP 3/71 (0.042), FN 9/80 (0.113).
The three are a holding-style reject that never states the decision, a decline that promises a
replacement on request, and a decline that hints the customer mishandled the item; the nine false
negatives are mostly long explanations of the rule and non-native phrasing.

Then its nine false negatives were examined and fixed by class, on new replies written for each class
(tests/env/test_replies_batch7_classes.py, ``b7c-*`` in the dev corpus; never this batch's sentences): a day
count of this order read as a limit, a rule's trigger or a check with the carrier read as an asserted reason,
neutral holding replies read as insinuating or as granting, use said as "was already used", and a terse
approval with its subject left out. After: FN 0/80 on every binding, FP unchanged (13/83; 3/71 on the replies
that follow the gold). From here on the batch is no longer unseen: these rates are a regression floor, not an
accuracy; the on-arrival numbers above remain the measurement of unseen wording. Questions are unchanged.
"""

from __future__ import annotations

import pytest

from service.env.customer import TOPICS, topics_asked
from tests.env.corpus_binding import assert_within, follows_gold, load, rates

# Measured after the class fixes (see above); deterministic readers, so the bound is the measured share itself.
REPLY_BOUNDS = {"false_positive_rate": 0.1566, "false_negative_rate": 0.0}
FOLLOWING_GOLD_FP = 0.0423  # false positives among replies whose decision is the gold or its alternative
QUESTION_FLOOR = 0.843


def test_the_holdout_is_well_formed() -> None:
    entries = load("replies_holdout4.jsonl")
    assert len(entries) == 163 and len({e["id"] for e in entries}) == 163
    assert {e["task"] for e in entries} == {"resolution", "routing"}
    questions = load("questions_holdout4.jsonl")
    assert len(questions) == 64 and all(set(q["topics"]) <= set(TOPICS) for q in questions)


@pytest.mark.parametrize("nth", [0, 1, 2])
def test_reply_rates_stay_at_what_the_holdout_measured(nth: int) -> None:
    """Bound to the first ticket of each case, and to two others (other products, amounts, days)."""
    assert_within("replies_holdout4.jsonl", REPLY_BOUNDS, nth)
    following = rates([e for e in load("replies_holdout4.jsonl") if follows_gold(e)], nth)
    assert following["false_positive_rate"] <= FOLLOWING_GOLD_FP, following["false_positives"]


def test_question_reading_stays_at_what_the_holdout_measured() -> None:
    questions = load("questions_holdout4.jsonl")
    misses = [(q["id"], q["question"]) for q in questions if topics_asked(q["question"]) != set(q["topics"])]
    assert 1 - len(misses) / len(questions) >= QUESTION_FLOOR, misses
