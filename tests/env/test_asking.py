"""Issue #21.4: asking costs the resolution when the policy did not need it, in every task; honest
asking is never punished (validity.md §5); and the customer answers only what was asked, in words of
its own — never the claim restated as the message's template text.

Before: a needless question lowered the score by 0.05 but never ``resolved`` (an oracle that always asked
first resolved 1.00 of every task, three needless questions still 1.00), and one catch-all question made
the customer restate the claim ("Like I said, my Ionic Hair Dryer is faulty."), so an agent that never
read the message resolved 0.97 / 0.98 of two secret test splits.
"""

from __future__ import annotations

import pytest

from bench.gaming_agents import (
    ANSWER_ONLY_RESOLVED,
    CATCH_ALL_QUESTION,
    HEADER_LOOKUPS_RESOLVED,
    HEADER_ONLY_RESOLVED,
    AnswerOnly,
    HeaderAndLookups,
    HeaderOnly,
    play_pool,
)
from service.env import TICKET_TASKS as TASKS  # the ticket tasks: the store desk's asking is in test_store_*
from service.env import Action, Dataset, derive_test_key
from service.env.agents import _QUESTIONS, HeuristicAgent, play, read_issue
from service.env.customer import answer, relevant_topics
from service.env.dataset import PUBLIC
from service.env.policy import evaluate
from tests.env.oracles import ObservableOracleAgent

SECRET = Dataset(test_key=derive_test_key("the asking suite's deployment key"))


class AskFirst(ObservableOracleAgent):
    """The observable oracle, after ``questions`` catch-all questions it may not need."""

    def __init__(self, questions: int = 1) -> None:
        super().__init__()
        self.questions = questions

    def act(self, obs):  # type: ignore[no-untyped-def]
        if self.questions:
            self.questions -= 1
            return Action(decision="request_info", reply=CATCH_ALL_QUESTION)
        return super().act(obs)


class UnclearFirst(ObservableOracleAgent):
    """The observable oracle, after a question the customer cannot read as asking anything."""

    def __init__(self) -> None:
        super().__init__()
        self.first = True

    def act(self, obs):  # type: ignore[no-untyped-def]
        if self.first:
            self.first = False
            return Action(decision="request_info", reply="Could you help me understand?")
        return super().act(obs)


def _pool(task_id: str, split: str = "dev", dataset: Dataset = PUBLIC) -> list[str]:
    task = TASKS[task_id]
    return dataset.pool(split, task.family, task.difficulty)


@pytest.mark.parametrize("task_id", list(TASKS))
def test_a_question_the_policy_did_not_need_costs_the_resolution(task_id: str) -> None:
    """Every dev ticket: asking first resolves exactly the tickets where the policy needed the answer."""
    wrong = []
    for seed, tid in enumerate(_pool(task_id)):
        needed = evaluate(PUBLIC.ticket(tid)).gold == "request_info"
        grade, _ = play(AskFirst(), task_id, seed, "dev")
        check = next(c for c in grade.components if c.name == "no_needless_question")
        if grade.resolved != needed or check.passed != needed:
            wrong.append((seed, needed, grade.resolved, check.detail))
    assert not wrong, wrong[:5]


@pytest.mark.parametrize("task_id", list(TASKS))
def test_honest_asking_is_never_punished(task_id: str) -> None:
    """A question the customer did not understand, then the right one: both were needed (the verdict
    still waited on the customer), so the episode resolves."""
    unresolved = []
    for seed, tid in enumerate(_pool(task_id)):
        verdict = evaluate(PUBLIC.ticket(tid))
        if verdict.gold != "request_info":
            continue
        grade, _ = play(UnclearFirst(), task_id, seed, "dev")
        if not grade.resolved:
            unresolved.append((seed, [c.detail for c in grade.components if not c.passed]))
    assert not unresolved, unresolved[:3]


def _all_answers(dataset: Dataset, split: str):  # type: ignore[no-untyped-def]
    questions = {**_QUESTIONS, "all": CATCH_ALL_QUESTION}
    for ticket in dataset.tickets(split):
        for asked, question in questions.items():
            yield ticket, asked, *answer(ticket, question, 0)


@pytest.mark.parametrize(("split", "dataset"), [("dev", PUBLIC), ("test", SECRET)], ids=["dev", "secret-test"])
def test_the_customer_never_restates_the_claim(split: str, dataset: Dataset) -> None:
    """No answer repeats a sentence of the first message, and an answer to a topic the customer has
    nothing hidden about says nothing of the claim: no item, no issue a keyword reader would find."""
    restated = []
    for ticket, asked, text, stated in _all_answers(dataset, split):
        message = {s.strip(" .!?").lower() for s in ticket.message.replace("\n", " ").split(".") if len(s) > 12}
        said = {s.strip(" .!?").lower() for s in text.split(".") if len(s) > 12}
        names = [line.product.name.lower() for line in ticket.order.lines]
        if asked != "all" and asked not in relevant_topics(ticket):
            if stated or read_issue(text) != "vague" or any(n in text.lower() for n in names):
                restated.append((ticket.ticket_id, asked, text))
        elif message & said:
            restated.append((ticket.ticket_id, asked, text))
    assert not restated, restated[:5]


def test_the_customer_reveals_only_what_was_asked() -> None:
    """A single-topic question reveals at most that topic (before: the details of a vague claim
    volunteered whether the item was used)."""
    volunteered = [
        (ticket.ticket_id, asked, sorted(stated))
        for ticket, asked, _text, stated in _all_answers(PUBLIC, "dev")
        if asked != "all" and stated - {asked}
    ]
    assert not volunteered, volunteered[:5]


@pytest.mark.parametrize("task_id", list(TASKS))
def test_reading_part_of_the_ticket_stays_under_its_cap_on_a_secret_split(task_id: str) -> None:
    """On a test split under a key nobody tuned on: the answer-only agent resolves no more than the
    heuristic that reads the message (before: 0.97 / 0.98 against 0.87 / 0.90), and the header readers
    stay under their caps (bench.gaming_agents says what they reach)."""
    heuristic, _ = play_pool(lambda t, s: HeuristicAgent(s), task_id, "test", SECRET)
    answer_only, _ = play_pool(lambda t, s: AnswerOnly(s), task_id, "test", SECRET)
    header, _ = play_pool(lambda t, s: HeaderOnly(s), task_id, "test", SECRET)
    header_lookups, _ = play_pool(lambda t, s: HeaderAndLookups(s), task_id, "test", SECRET)
    assert answer_only <= min(heuristic, ANSWER_ONLY_RESOLVED), (answer_only, heuristic)
    assert header <= HEADER_ONLY_RESOLVED and header_lookups <= HEADER_LOOKUPS_RESOLVED, (header, header_lookups)
