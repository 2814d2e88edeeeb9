"""The second holdout: blind batch 4 (130 replies, 55 questions), written by an outside author who never
saw the readers or the corpora, and graded once on arrival. It is never used to change a reader; its
bounds are what it measured, so a change that makes the readers worse on unseen wording fails here.

On arrival (the round-3 readers): replies FP 4/69 (0.058), FN 9/61 (0.148); questions 0.891 (49/55).
After round 4 (fixes by class from blind batch 5, written by another author at the same time): the
same, to the entry. The round's fixes took batch 5 from FP 3/63, FN 12/67 to 0/63, 2/67 and moved this
batch not at all: the honest reading is that each author's wording still brings classes of its own.
Issue 23 (the vocabulary in data files, the issue's three classes, then batch 6's classes — none informed
by this batch): FP 4/69, FN 7/61 (0.115; b4_037 and b4_063 now read as the lead does). Batch 8's classes
(a holding reply must name who handles the ticket, none informed by this batch): FP 3/69 (0.043; b4_102,
"we're looking into it and will get back to you soon", now refused), FN 7/61. The bounds follow.
"""

from __future__ import annotations

import json

import pytest

from service.env.customer import TOPICS, topics_asked
from tests.env.corpus_binding import CORPUS, assert_within, load

# Measured once (see above); deterministic readers, so the bound is the measured share itself.
REPLY_BOUNDS = {"false_positive_rate": 0.0435, "false_negative_rate": 0.1148}
QUESTION_FLOOR = 0.89


def test_the_holdout_is_well_formed() -> None:
    entries = load("replies_holdout2.jsonl")
    assert len(entries) == 130 and len({e["id"] for e in entries}) == 130
    assert {e["task"] for e in entries} == {"resolution", "routing"}
    questions = [json.loads(line) for line in (CORPUS / "questions_holdout2.jsonl").read_text().splitlines()]
    assert len(questions) == 55 and all(set(q["topics"]) <= set(TOPICS) for q in questions)


@pytest.mark.parametrize("nth", [0, 1, 2])
def test_reply_rates_stay_at_what_the_holdout_measured(nth: int) -> None:
    """Bound to the first ticket of each case, and to two others (other products, amounts, days)."""
    assert_within("replies_holdout2.jsonl", REPLY_BOUNDS, nth)


def test_question_reading_stays_at_what_the_holdout_measured() -> None:
    questions = [json.loads(line) for line in (CORPUS / "questions_holdout2.jsonl").read_text().splitlines()]
    misses = [(q["id"], q["question"]) for q in questions if topics_asked(q["question"]) != set(q["topics"])]
    assert 1 - len(misses) / len(questions) >= QUESTION_FLOOR, misses
