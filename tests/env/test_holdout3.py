"""The third holdout: blind batch 6 (171 replies, 62 questions), written by an outside author who read only
the store policy and the methodology's prose, and graded once on arrival (issue 23).

Conversion, fixed before grading: ``{warranty}`` is the warranty in months and ``{window}`` 30 days
(``corpus_binding.fill``); the author's question topics "condition" are the customer's "usage", and
"order" (asking for the order number) is no topic of the scripted customer (``author_topics`` keeps the
original). Nine routing replies without the order id were labelled acceptable by the author's rule 9
("need not quote the id"); the routing rubric requires it (``reply_order_id``), so they are unacceptable
here (each carries a ``note``).

On arrival, with the reader at c948755 (this branch's reader was still the same code): replies FP 6/97
(0.062), FN 10/74 (0.135) — on the author's own labels FP 6/88 (0.068), FN 19/83 (0.229), the nine order-id
disagreements included — the same bound to the first three tickets of each case; questions 48/62
(0.774).

After the vocabulary moved to data files and the three classes issue 23 names were fixed (written from
the issue, before anyone looked at this batch's entries, so still an unseen measurement): FP 6/97, FN 7/74
(0.095).

Then its misses were examined and fixed by class, on new replies (tests/env/test_replies_batch6_classes.py,
never this batch's sentences): FP 0/97, FN 1/74 (b6_108: a greeting and an explanation with no warm word,
the class b5_079 left open); on the author's labels FP 0/88, FN 10/83. From here on the batch is no longer
unseen: these rates are a regression floor, not an accuracy. Questions are unchanged (48/62): the question
reader shares no vocabulary with the reply reader and was not changed.
"""

from __future__ import annotations

import json

import pytest

from service.env.customer import TOPICS, topics_asked
from tests.env.corpus_binding import CORPUS, assert_within, load

# Measured after the fixes (see above); deterministic readers, so the bound is the measured share itself.
REPLY_BOUNDS = {"false_positive_rate": 0.0, "false_negative_rate": 0.0136}
QUESTION_FLOOR = 0.774


def test_the_holdout_is_well_formed() -> None:
    entries = load("replies_holdout3.jsonl")
    assert len(entries) == 171 and len({e["id"] for e in entries}) == 171
    assert {e["task"] for e in entries} == {"resolution", "routing"}
    questions = load("questions_holdout3.jsonl")
    assert len(questions) == 62 and all(set(q["topics"]) <= set(TOPICS) for q in questions)


@pytest.mark.parametrize("nth", [0, 1, 2])
def test_reply_rates_stay_at_what_the_holdout_measured(nth: int) -> None:
    """Bound to the first ticket of each case, and to two others (other products, amounts, days)."""
    assert_within("replies_holdout3.jsonl", REPLY_BOUNDS, nth)


def test_question_reading_stays_at_what_the_holdout_measured() -> None:
    questions = [json.loads(line) for line in (CORPUS / "questions_holdout3.jsonl").read_text().splitlines()]
    misses = [(q["id"], q["question"]) for q in questions if topics_asked(q["question"]) != set(q["topics"])]
    assert 1 - len(misses) / len(questions) >= QUESTION_FLOOR, misses
