"""The store desk end to end in the core: every public conversation generates, the backend accepts every
gold write, and a perfect conversation resolves every train and dev ticket."""

from __future__ import annotations

import re
from datetime import date, timedelta

import pytest

from service.env import PUBLIC, TASKS
from service.env.agents import play
from tests.env.store_oracles import GoldOracle, ObservableOracle

STORE_TASKS = [t for t in TASKS.values() if t.family == "store"]


@pytest.mark.parametrize("split", ["train", "dev"])
@pytest.mark.parametrize("task", STORE_TASKS, ids=lambda t: t.id)
def test_the_gold_oracle_resolves_every_public_store_ticket_and_every_gold_write_is_accepted(task, split) -> None:
    pool = PUBLIC.pool(split, "store", task.difficulty)
    failures = []
    for seed in range(len(pool)):
        grade, _ = play(GoldOracle(pool[seed], PUBLIC), task.id, seed, split)
        if not grade.resolved:
            failures.append((seed, [c.detail for c in grade.components if not c.passed]))
    assert not failures, failures[:5]


@pytest.mark.parametrize("split", ["train", "dev"])
@pytest.mark.parametrize("task", STORE_TASKS, ids=lambda t: t.id)
def test_an_oracle_that_sees_only_what_an_agent_sees_resolves_every_public_store_ticket(task, split) -> None:
    pool = PUBLIC.pool(split, "store", task.difficulty)
    failures = []
    for seed in range(len(pool)):
        try:
            grade, _ = play(ObservableOracle(), task.id, seed, split)
        except AssertionError as exc:  # the oracle could not read the ticket: a generator bug
            failures.append((seed, str(exc)[:300]))
            continue
        if not grade.resolved:
            failures.append((seed, [c.detail for c in grade.components if not c.passed]))
    assert not failures, failures[:5]


def test_tracking_runs_in_order_and_estimates_come_after_shipping() -> None:
    for split in ("train", "dev"):
        for t in PUBLIC.store_tickets(split):
            for order in t.db.orders:
                for s in order.shipments:
                    dates = [e.date for e in s.events]
                    assert dates == sorted(dates) and s.estimated_delivery > s.shipped_on, (t.ticket_id, s)
                    # shipped after the order was placed, nothing after today
                    assert order.placed_on <= s.shipped_on <= dates[0] and dates[-1] <= t.db.today, (t.ticket_id, s)
                    if s.delivered_on is not None:
                        assert s.events[-1].status == "delivered", (t.ticket_id, s)


def test_a_quoted_earlier_message_was_sent_after_what_it_complains_about() -> None:
    from datetime import date

    months = {date(2026, m, 1).strftime("%B"): m for m in range(1, 13)}
    names = "|".join(months)
    spoken = re.compile(
        rf"(\d{{1,2}})(?:st|nd|rd|th)? (?:of )?({names})|({names}) (\d{{1,2}})|\b(\d{{1,2}})/(\d{{1,2}})\b"
    )
    quoted = 0
    for split in ("train", "dev"):
        for t in PUBLIC.store_tickets(split):
            if "\n> " not in t.message:
                continue
            header = t.message.split("\n> ")[0].rsplit("\n\n", 1)[-1]
            m = spoken.search(header)
            assert m, (t.ticket_id, header)
            day, month = (
                (int(m[1]), months[m[2]]) if m[1] else (int(m[4]), months[m[3]]) if m[3] else (int(m[5]), int(m[6]))
            )
            today = date.fromisoformat(t.db.today)
            sent = date(today.year if (month, day) <= (today.month, today.day) else today.year - 1, month, day)
            for r in t.requests:
                order = t.db.order(r.order_id)
                assert order is not None and sent.isoformat() > order.placed_on, (t.ticket_id, header)
                assert all(sent.isoformat() > s.delivered_on for s in order.shipments if s.delivered_on), t.ticket_id
            quoted += 1
    assert quoted >= 10  # hard tickets do quote earlier messages


def test_a_forwarded_message_is_the_holders_own_under_a_note_signed_by_who_forwards_it() -> None:
    forwarded = 0
    for split in ("train", "dev"):
        for t in PUBLIC.store_tickets(split):
            header = re.search(
                r"\n\n(?:-+ ?Forwarded|Begin forwarded|Forwarded email|Forwarding from|-+ Message from)", t.message
            )
            if t.writer.holder or header is None:
                continue
            note, inner = t.message[: header.start()], t.message[header.start() :]
            holder_first = t.db.account.name.split()[0]
            assert t.writer.name.split()[0] in note and inner.rstrip().endswith(holder_first), t.message
            assert t.writer.name.split()[0] not in inner and f"my {t.writer.relation}" not in inner, t.message
            forwarded += 1
    assert forwarded >= 3  # a few of the conversations with someone other than the holder


def test_order_ids_are_found_as_customers_write_them() -> None:
    from service.env.store.world import canonical_order_id

    for written in ("ord81249", "ORD 81249", "#ORD-81249", "ord-81249", " ORD-81249 "):
        assert canonical_order_id(written) == "ORD-81249"
    assert canonical_order_id("ORD-ABC") == "ORD-ABC"


@pytest.mark.parametrize("ask", ["Would that work for you?", "Are you OK with that?", "Let me know if you agree."])
def test_gold_plans_resolve_when_the_yes_is_asked_in_other_words_and_not_listed(ask: str) -> None:
    """The customer understands a natural request for a yes without ``asking_for``."""
    failures = []
    for d in ("easy", "medium", "hard"):
        pool = PUBLIC.pool("dev", "store", d)
        for seed, tid in enumerate(pool):
            oracle = GoldOracle(tid, PUBLIC)
            for k, (name, args) in enumerate(oracle.plan):
                if name == "send_message" and args.get("asking_for") == ["confirmation"]:
                    oracle.plan[k] = (name, {"text": args["text"].replace("Shall I go ahead?", ask)})
            grade, _ = play(oracle, f"store-{d}", seed, "dev")
            if not grade.resolved:
                failures.append((d, seed, [c.detail for c in grade.components if not c.passed]))
    assert not failures, failures[:3]


def test_the_step_cap_leaves_a_careful_agent_a_dozen_steps_beyond_a_perfect_conversation() -> None:
    """Reading the policy, a question more, a retried call: a perfect conversation plus 12 fits the cap."""
    from bench.store_report import perfect_calls
    from service.env.store.policy import decide
    from service.env.tasks import STORE_MAX_STEPS

    longest = max(perfect_calls(t, decide(t)) for split in ("train", "dev") for t in PUBLIC.store_tickets(split))
    assert longest + 12 <= STORE_MAX_STEPS, (longest, STORE_MAX_STEPS)


def test_the_public_stores_hold_earlier_returns_replacements_and_store_credit_payments_that_decide_tickets() -> None:
    """Issue 19 item 2: account history with earlier refunds, returns and replacements, and orders paid in
    part with store credit — some of them deciding a ticket (a claim settled already, a refund split)."""
    from service.env.store.policy import decide

    tickets = [t for split in ("train", "dev") for t in PUBLIC.store_tickets(split)]
    orders = [o for t in tickets for o in t.db.orders]
    assert sum(bool(o.returns) for o in orders) >= 20 and sum(bool(o.replacements) for o in orders) >= 20
    assert sum(any(p.method == "store_credit" for p in o.payments) for o in orders) >= 50
    golds = [decide(t) for t in tickets]
    assert sum(any(o.reason == "already_settled" for o in g.outcomes) for g in golds) >= 10
    split = [e for g in golds for e in g.effects if getattr(e, "amounts", None) and len(e.amounts) > 1]  # type: ignore[arg-type]
    assert len(split) >= 10
    for t in tickets:  # the account's returns count includes what its orders show
        year_ago = (date.fromisoformat(t.db.today) - timedelta(days=365)).isoformat()
        assert t.db.account.returns_12m >= sum(1 for o in t.db.orders for r in o.returns if r.date >= year_ago)


@pytest.mark.parametrize("difficulty", ["medium", "hard"])
def test_refusing_is_right_for_a_minority_of_tickets_and_no_plan_shape_dominates(difficulty: str) -> None:
    """A desk where declining everything is usually right measures little (issue 19's audit: 44 % of easy
    and 30 % of medium dev tickets had nothing to write)."""
    from bench.store_report import shapes
    from service.env.store.policy import decide

    for split in ("train", "dev"):
        golds = [decide(t) for t in PUBLIC.store_tickets(split) if t.difficulty == difficulty]
        report = shapes(golds)
        assert report["no_write_share"] <= 0.2 and report["largest_plan_shape"]["share"] <= 0.25, (split, report)


def _per_unit(ticket, name: str, args: dict) -> list[tuple[str, dict]]:
    """A refund of several units to one destination as one refund per unit: each unit what it was paid
    (the shipping fee with the first), the last whatever makes up the same total."""
    from service.env.store.money import paid_for

    units = [(item["line_no"], item["quantity"]) for item in args.get("items", [])]
    if name != "refund" or sum(q for _, q in units) < 2 or len(args["amounts"]) != 1:
        return [(name, args)]
    order = ticket.db.order(args["order_id"])
    each = []
    for n, q in units:
        one = paid_for(order, n, 1)
        each += [(n, one)] * (q - 1) + [(n, paid_for(order, n, q) - one * (q - 1))]
    fee = order.shipping_fee if args.get("include_shipping") else 0
    total = round(args["amounts"][0]["amount"] * 100)
    each[-1] = (each[-1][0], total - fee - sum(c for _, c in each[:-1]))
    each[0] = (each[0][0], each[0][1] + fee)
    return [
        (
            "refund",
            {
                "order_id": args["order_id"],
                "items": [{"line_no": n, "quantity": 1}],
                "include_shipping": bool(fee) and k == 0,
                "amounts": [{"to": args["amounts"][0]["to"], "amount": cents / 100}],
            },
        )
        for k, (n, cents) in enumerate(each)
    ]


def test_gold_plans_with_their_refunds_split_per_unit_resolve_as_they_do_whole() -> None:
    """Equivalent write sequences count the same (issue 19 audit: splitting refunds per unit failed every
    applicable dev ticket's confirmed check)."""
    split = 0
    failures = []
    for d in ("easy", "medium", "hard"):
        for seed, tid in enumerate(PUBLIC.pool("dev", "store", d)):
            oracle = GoldOracle(tid, PUBLIC)
            ticket = PUBLIC.store_ticket(tid)
            plan = [call for name, args in oracle.plan for call in _per_unit(ticket, name, args)]
            if len(plan) == len(oracle.plan):
                continue
            oracle.plan = plan
            split += 1
            grade, _ = play(oracle, f"store-{d}", seed, "dev")
            if not grade.resolved:
                failures.append((d, seed, [c.detail for c in grade.components if not c.passed]))
    assert split >= 4 and not failures, (split, failures[:3])
