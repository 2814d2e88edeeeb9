"""What the store desk's tickets demand, per tier, from the policy's gold (issue 19's targets):

- tool calls of a perfect conversation (identity, reads, questions, confirmations, writes, telling, ending);
- facts combined: the policy sections that decide the ticket plus what the customer must be asked;
- amount rules: how many rules the largest refund, credit or escalated amount of the ticket combines (a rule
  counts where it changes the amount: P18's price, discount share and part of a line, P19, P20, P21's split,
  P24, P27);
- the share of tickets the policy answers with no write at all (refusing is right), and the share of the
  most frequent plan shape (the kinds of write the gold makes);
- the reference agents' resolved rate per task.

    .venv/bin/python -m bench.store_report          # JSON on stdout (public train and dev splits)
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from statistics import median
from typing import Any

from service.env import PUBLIC, PUBLIC_SPLITS
from service.env.agents import make_agent, play
from service.env.store.ledger import EscalateEffect
from service.env.store.policy import Gold, decide
from service.env.store.world import StoreTicket
from service.env.world import DIFFICULTIES

PROCEDURE = frozenset({"P15", "P16", "P17", "P32"})  # every ticket's; not what decides it


def perfect_calls(t: StoreTicket, gold: Gold) -> int:
    """The tool calls of the shortest conversation that resolves ``t``."""
    if not gold.holder:
        return 2  # tell why, end
    identity = 2 if t.writer.gave_identity else 3 + int(t.hidden.wrong_postcode_first)
    reads = 1 + len({r for o in gold.outcomes for r in o.reads})  # the customer, then each record
    questions = int(bool(gold.needs))
    changes = [e for e in gold.effects if not isinstance(e, EscalateEffect)]
    confirmations = (1 + any(r.mind_change for r in t.requests)) if changes else 0
    return identity + reads + questions + confirmations + len(gold.effects) + 2


def facts_combined(gold: Gold) -> int:
    clauses = {c for o in gold.outcomes for c in o.clauses} - PROCEDURE
    return len(clauses) + len(gold.needs)


def plan_shape(gold: Gold) -> tuple[str, ...]:
    """The kinds of write the gold makes ("refund", "return", …): () when it writes nothing."""
    return tuple(sorted({e.kind for e in gold.effects}))


def shapes(golds: list[Gold]) -> dict[str, Any]:
    counts = Counter(plan_shape(g) for g in golds)
    top, n = counts.most_common(1)[0]
    return {
        "no_write_share": round(counts[()] / len(golds), 3),
        "largest_plan_shape": {"shape": "+".join(top) or "no write", "share": round(n / len(golds), 3)},
    }


def _dist(values: list[int]) -> dict[str, Any]:
    return {"median": median(values), "min": min(values), "max": max(values)}


def report() -> dict[str, Any]:
    out: dict[str, Any] = {}
    for split in PUBLIC_SPLITS:
        out[split] = {}
        for difficulty in DIFFICULTIES:
            tickets = [t for t in PUBLIC.store_tickets(split) if t.difficulty == difficulty]
            golds = [decide(t) for t in tickets]
            rules = [max((len(o.rules) for o in g.outcomes), default=0) for g in golds]
            pool = PUBLIC.pool(split, "store", difficulty)
            agents = {}
            for name in ("random", "heuristic"):
                grades = [
                    play(make_agent(name, k, tid), f"store-{difficulty}", k, split)[0] for k, tid in enumerate(pool)
                ]
                agents[name] = round(sum(g.resolved for g in grades) / len(grades), 3)
            out[split][difficulty] = {
                "tickets": len(tickets),
                "requests": _dist([len(t.requests) for t in tickets]),
                "perfect_tool_calls": _dist([perfect_calls(t, g) for t, g in zip(tickets, golds, strict=True)]),
                "facts_combined": _dist([facts_combined(g) for g in golds]),
                "amount_rules": _dist(rules),
                "share_with_an_amount_of_two_rules_or_more": round(sum(r >= 2 for r in rules) / len(rules), 3),
                **shapes(golds),
                "resolved": agents,
            }
    return out


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args(argv)
    print(json.dumps(report(), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
