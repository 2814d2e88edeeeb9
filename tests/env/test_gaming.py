"""The gaming suite: no strategy that skips the job scores, and nothing but content predicts labels.

Bounds (see ``gaming_agents.bounds``): a strategy that gives no answer must stay at or below a
resolved rate of 0.15 and a mean score of 0.30 on every task. A strategy that *guesses* one answer
without reading the ticket (a constant, the most frequent training label, a position lookup table,
a reward prober that falls back to a constant) is held to absolute caps, the same on every task:
resolved ≤ 0.35 and mean ≤ 0.55. That exception is the justification the issue asks for: each pool
deals four outcomes, none to more than 2/7 of it, and the tickets that need asking are dealt evenly
among three answers after asking, so a constant — given plainly or after a catch-all question — is
right on at most 1/4 + 1/12 = 1/3 of a pool (23/66 = 0.348 with a 66-ticket pool's rounding). Its mean
adds the asking credit (0.3 of a decision ticket's score on the quarter that needs asking) and half
credit where its answer is the acceptable alternative: ~0.50 measured. A generator change that skews a
pool's labels lets a constant through the cap and fails here (``test_no_constant_answer_beats_the_cap``).
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from bench.gaming_agents import (
    GUESS_MEAN,
    GUESS_RESOLVED,
    MARGIN,
    PositionClassifier,
    answer_of,
    bounds,
    constant_ceiling,
    labelled_rows,
    play_pool,
    strategies,
)
from service.env import PUBLIC, Dataset, derive_test_key
from service.env import TICKET_TASKS as TASKS  # the ticket tasks: the store desk has its own suite
from tests.env.oracles import pool_grades

TEST_DATASET = Dataset(test_key=derive_test_key("a deployment key for the gaming suite"))
README = (Path(__file__).resolve().parents[2] / "docs" / "methodology.md").read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def train_rows() -> dict:
    return {t: labelled_rows(t, "train", PUBLIC) for t in TASKS}


# Held-out tickets for the leak tests: dev and the test split under several keys (~470 per task, so the
# accuracy of a useless table wanders by ±0.02 and a +0.05 margin is more than two of those).
HELD_OUT_KEYS = tuple(Dataset(test_key=derive_test_key(f"position leak {i}")) for i in range(6))


def _held_out(task_id: str, label) -> list[tuple[int, str, str]]:
    """(seed, ticket id, label) over dev and every held-out key's test split."""
    task = TASKS[task_id]
    rows = []
    for split, dataset in (("dev", PUBLIC), *(("test", d) for d in HELD_OUT_KEYS)):
        pool = dataset.pool(split, task.family, task.difficulty)
        rows += [(k, tid, label(task_id, dataset.ticket(tid))) for k, tid in enumerate(pool)]
    return rows


def _claim_kind(task_id: str, ticket) -> str:
    return (
        ticket.claim.issue if ticket.claim.second_issue is None else f"{ticket.claim.issue}+{ticket.claim.second_issue}"
    )


@pytest.mark.parametrize("label", [answer_of, _claim_kind], ids=["answer", "claim_kind"])
@pytest.mark.parametrize("task_id", list(TASKS))
def test_position_predicts_neither_the_answer_nor_the_scenario(task_id: str, label) -> None:
    """validity.md §1, sharply: the best lookup table from one position feature (the seed, the ticket
    id's number, either modulo every period 2..64), chosen and fitted on train, is no better than the
    majority class + 0.05 on held-out tickets, for the task's answer and for the claim kind. (Restoring
    a positional deal — outcome ``i % 4`` at position ``i``, or the old ``(i // 6) % len(kinds)`` — makes
    the table exact: 1.00.)"""
    task = TASKS[task_id]
    train = [
        (k, tid, label(task_id, PUBLIC.ticket(tid)))
        for k, tid in enumerate(PUBLIC.pool("train", task.family, task.difficulty))
    ]
    classifier = PositionClassifier.fit(train)
    rows = _held_out(task_id, label)
    majority = Counter(answer for *_, answer in rows).most_common(1)[0][1] / len(rows)
    accuracy = classifier.accuracy(rows)
    assert accuracy <= majority + MARGIN, (task_id, classifier.feature, round(accuracy, 3), round(majority, 3))


def _surface(ticket) -> dict[str, object]:
    """What a ticket shows besides its content: the message's length, words, sentences, first and last
    words, the subject, the tone, the number of items, the claimed item's price cents, the order id's residues."""
    words = ticket.message.split()
    line = ticket.order.lines[ticket.claim.line]
    digits = int(ticket.order.order_id.removeprefix("ORD-"))
    return {
        "length": len(ticket.message) // 40,
        "words": len(words) // 8,
        "sentences": len([s for s in re.split(r"(?<=[.!?])\s+|\n+", ticket.message) if s.strip()]),
        "first_word": words[0].lower().strip(",.!?"),
        "last_word": words[-1].lower().strip(",.!?"),
        "subject": ticket.subject,
        "tone": ticket.claim.tone,
        "items": len(ticket.order.lines),
        "price_cents": round(line.product.price * 100) % 100,
        **{f"order_id%{p}": digits % p for p in (2, 3, 5, 7, 10, 12, 60)},
    }


# Surface features that carry what the message says: they may tell what the claim is (the subject line
# "Damaged item" does), so they are held to what the claim kind alone tells — never more.
_CARRIES_THE_CLAIM = frozenset({"length", "words", "sentences", "first_word", "last_word", "subject", "tone"})


def _lookup(rows: list[tuple[dict, str]], name: str):
    table: dict[object, Counter] = {}
    for features, answer in rows:
        table.setdefault(features[name], Counter())[answer] += 1
    fallback = Counter(a for _, a in rows).most_common(1)[0][0]
    mapping = {k: c.most_common(1)[0][0] for k, c in table.items()}
    return lambda features: mapping.get(features[name], fallback)


@pytest.mark.parametrize("task_id", list(TASKS))
def test_no_surface_feature_predicts_the_answer(task_id: str) -> None:
    """validity.md §1: a lookup table from one non-content feature, learned on train, scores no better on
    held-out tickets than the majority class + 0.05 — or, for features that carry the message's claim
    (length, subject, tone…), than the claim kind's own table + 0.05."""
    task = TASKS[task_id]

    def rows(dataset: Dataset, split: str) -> list[tuple[dict, str]]:
        out = []
        for tid in dataset.pool(split, task.family, task.difficulty):
            t = dataset.ticket(tid)
            out.append(({**_surface(t), "claim_kind": _claim_kind(task_id, t)}, answer_of(task_id, t)))
        return out

    train = rows(PUBLIC, "train")
    held = rows(PUBLIC, "dev") + [r for d in HELD_OUT_KEYS for r in rows(d, "test")]
    majority = Counter(a for _, a in held).most_common(1)[0][1] / len(held)

    def accuracy(name: str) -> float:
        rule = _lookup(train, name)
        return sum(rule(f) == a for f, a in held) / len(held)

    claim = max(majority, accuracy("claim_kind"))
    over = {
        name: round(acc, 3)
        for name in _surface(PUBLIC.ticket(PUBLIC.pool("dev", task.family, task.difficulty)[0]))
        if (acc := accuracy(name)) > (claim if name in _CARRIES_THE_CLAIM else majority) + MARGIN
    }
    assert not over, (task_id, round(majority, 3), round(claim, 3), over)


def test_ticket_ids_and_seeds_carry_no_index() -> None:
    dev = PUBLIC.pool("dev", "decision", "easy")
    assert all(tid.startswith("tk_") and len(tid) == 19 for tid in dev)
    assert not set(dev) & set(PUBLIC.pool("train", "decision", "easy"))
    assert not set(dev) & set(TEST_DATASET.pool("test", "decision", "easy"))


@pytest.fixture(scope="module")
def report() -> dict:
    """The gaming table (``bench.gaming``): every strategy on every task — on dev, except the reward
    prober, which needs the dense rewards of plain train episodes (runs withhold them) — each pool's
    best constant answer, and the reference agents."""
    from bench.gaming import table

    return table()


@pytest.fixture(scope="module")
def suite(train_rows: dict, report: dict) -> dict:
    """(strategy, (resolved, mean), best constant on dev) for every strategy and task, read off the table."""
    rows = {row["strategy"]: row for row in report["rows"]}
    ceiling = next(row for name, row in rows.items() if name.startswith("best constant answer"))
    results = {}
    for strategy in strategies(train_rows, PUBLIC, "dev"):
        for task_id in TASKS:
            cell = rows[strategy.name]["tasks"][task_id]
            best = ceiling["tasks"][task_id]
            results[(strategy.name, task_id)] = (
                strategy,
                (cell["resolved"], cell["mean"]),
                (best["resolved"], best["mean"]),
            )
    return results


def test_the_readme_shows_the_gaming_table_bench_gaming_prints(report: dict) -> None:
    """The README's gaming table is ``python -m bench.gaming --markdown``, verbatim."""
    from bench.gaming import markdown

    block = re.search(r"<!-- gaming:start -->\n(.*?)<!-- gaming:end -->", README, re.S)
    assert block, "README.md lacks the gaming block"
    assert block.group(1).strip() == markdown(report).strip(), (
        "README's gaming table drifted: paste `python -m bench.gaming --markdown`"
    )


def test_no_constant_answer_beats_the_cap(suite: dict) -> None:
    """The best constant answer of every pool (plain or after a catch-all question, with the reply that
    matches it) stays under the absolute caps, on dev and train. The resolution pool's constant once
    resolved 0.38 of dev (policy, question, approve_refund + a plain approval reply)."""
    for (_name, task_id), (_, _, ceiling) in suite.items():
        assert ceiling[0] <= GUESS_RESOLVED and ceiling[1] <= GUESS_MEAN, (task_id, "dev", ceiling)
    for task_id in TASKS:
        for split, dataset in (("train", PUBLIC), ("test", TEST_DATASET)):
            resolved, mean = constant_ceiling(task_id, split, dataset)
            assert resolved <= GUESS_RESOLVED and mean <= GUESS_MEAN, (task_id, split, resolved, mean)


def test_no_degenerate_strategy_beats_its_bound(suite: dict) -> None:
    over = []
    for (name, task_id), (strategy, (resolved, mean), _ceiling) in suite.items():
        max_resolved, max_mean = bounds(strategy, task_id)
        if resolved > max_resolved or mean > max_mean:
            over.append(
                f"{name} on {task_id}: resolved {resolved:.2f} (bound {max_resolved:.2f}), "
                f"mean {mean:.2f} (bound {max_mean:.2f})"
            )
    assert not over, "\n".join(over)


def test_strategies_that_answer_nothing_earn_nothing(suite: dict) -> None:
    for (name, task_id), (strategy, (resolved, mean), _) in suite.items():
        if not strategy.guesses and strategy.reads_part is None:
            assert resolved == 0.0 and mean <= 0.05, (name, task_id, resolved, mean)


def test_reference_agents_keep_their_places(suite: dict) -> None:
    """The oracle resolves every dev ticket; the heuristic stays clearly above every degenerate agent that
    reads nothing, the header or the answer alone with the heuristic's rules (by 0.25), and above the tables
    learned on train from the header and the records — by less on routing, where a fraud flag, a second
    charge, an item out of stock and a large amount name the queue (0.84 against 0.90 on dev)."""
    for task_id, task in TASKS.items():
        n = len(PUBLIC.pool("dev", task.family, task.difficulty))
        oracle = _rates(pool_grades("oracle", task_id, "dev"))
        assert oracle == (1.0, 1.0), (task_id, n, oracle)
        heuristic = _rates(pool_grades("heuristic", task_id, "dev"))
        cells = [(s, r) for (_, t), (s, (r, _), _) in suite.items() if t == task_id]
        learned = max(r for s, r in cells if isinstance(s.reads_part, dict))
        best_degenerate = max(r for s, r in cells if not isinstance(s.reads_part, dict))
        assert heuristic[0] >= best_degenerate + 0.25, (task_id, heuristic, best_degenerate)
        assert heuristic[0] > learned, (task_id, heuristic, learned)


def test_learned_readers_stay_under_their_caps_on_a_fresh_test_split() -> None:
    """The tables learned on train from the header (and the records) play a secret test split under a key
    they never saw as well as dev: their caps hold there too (the audit's two-field table: 0.63 of routing
    on two secret splits; these four-field ones: 0.82)."""
    over = []
    for strategy in strategies({t: labelled_rows(t, "train", PUBLIC) for t in TASKS}, TEST_DATASET, "test"):
        if not isinstance(strategy.reads_part, dict):
            continue
        for task_id in TASKS:
            resolved, _ = play_pool(strategy.make, task_id, "test", TEST_DATASET)
            if resolved > strategy.reads_part[task_id]:
                over.append((strategy.name, task_id, round(resolved, 3), strategy.reads_part[task_id]))
    assert not over, over


def test_the_readme_states_what_the_learned_readers_reach(report: dict) -> None:
    """The README's gaming claim quotes the most a learned header or header + records table resolves of a
    task on dev (the table it prints), so the claim cannot drift from what the suite measures."""
    rows = {row["strategy"]: row for row in report["rows"]}
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    for name in ("header only, a table learned on train", "header + lookups, a table learned on train"):
        row = next(r for n, r in rows.items() if n.startswith(name))
        best = max(cell["resolved"] for cell in row["tasks"].values())
        assert f"{best:.2f}" in readme, (name, best)


def _rates(grades) -> tuple[float, float]:
    """(resolved rate, mean score) of a pool's grades, as ``play_pool`` reports them."""
    return sum(g.resolved for g in grades) / len(grades), sum(g.score for g in grades) / len(grades)
