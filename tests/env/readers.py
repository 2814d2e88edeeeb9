"""Reading a ticket the way a careful person would, from what an agent sees — nothing else.

:class:`TicketReader` rebuilds the facts the policy needs only from an agent's observations: the
ticket header, the order and customer records it looked up, the customer's message and answers
(read against the phrasings customers use, :func:`phrasebook`, tolerant of typos), and the dates
(days are counted as P12 says). The observable oracle runs the policy on those facts: that every
train and dev ticket is solved this way is the proof that each ticket can be solved from what is
visible. Tests only, and never shipped: knowing every phrasing the generator
uses, it reads the test split as well as the public ones — in the installed package it would be a
script that tops the test board (issue #21.1). It reads the message banks of
:mod:`service.env.messages` by their private names, as a test may.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date
from typing import Any, Literal

from rapidfuzz import fuzz

from service.env import messages
from service.env.models import Observation
from service.env.policy import Verdict, evaluate
from service.env.tasks import get_task
from service.env.world import Claim, Customer, HiddenFacts, IssueType, Order, OrderLine, Product, Ticket


@dataclass(frozen=True)
class PhraseBook:
    """The phrasings customers use, for readers that know them (the observable oracle proves, with it,
    that every ticket can be solved from what an agent sees)."""

    issue_clauses: dict[str, tuple[str, ...]]
    used: tuple[str, ...]
    unused: tuple[str, ...]
    used_answers: tuple[str, ...]
    unused_answers: tuple[str, ...]
    damage_views: tuple[str, ...]
    wear_views: tuple[str, ...]
    found: tuple[str, ...]
    not_found: tuple[str, ...]
    second_claim_leads: tuple[str, ...]


def phrasebook() -> PhraseBook:
    strip = lambda bank: tuple(t.partition("|")[0] for t in bank)  # noqa: E731 - drop the usage tags
    return PhraseBook(
        issue_clauses={issue: strip(bank) for issue, bank in messages._ISSUE_CLAUSES.items()},
        used=strip(messages._USED_CLAUSES),
        unused=strip(messages._UNUSED_CLAUSES),
        used_answers=messages._USED_ANSWERS + messages._USED_ANSWERS_HARD + messages._USED_ANSWERS_SOFT,
        unused_answers=messages._UNUSED_ANSWERS + messages._UNUSED_ANSWERS_HARD + messages._UNUSED_ANSWERS_SOFT,
        damage_views=tuple(
            v for bank in (*messages._DAMAGE_VIEWS.values(), *messages._DEFECT_VIEWS.values()) for v in bank
        ),
        wear_views=tuple(
            v.format(period=p)
            for bank in messages._WEAR_VIEWS.values()
            for v in bank
            for p in ("a couple of weeks", "several weeks", "months")
        ),
        found=tuple(messages._FOUND.format(where=w) for w in messages._FOUND_PLACES),
        not_found=messages._NOT_FOUND,
        second_claim_leads=messages._SECOND_CLAIM_LEADS,
    )


_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_OPENED = re.compile(r"Opened on (\d{4}-\d{2}-\d{2})")
_IMAGES = re.compile(r"Images provided: (true|false)")
_ITEM = "ITEM"


def _score(template: str, text: str) -> float:
    template, text = template.lower(), text.lower()
    return fuzz.partial_ratio(template, text) if len(template) <= len(text) else fuzz.ratio(template, text)


def _typo_tolerant(word: str) -> str:
    """A pattern for ``word`` and the typos the generator makes in it (two letters swapped, one dropped):
    "Adn to make it worse", "And ot make it worse" still lead a second claim."""
    variants = {word}
    variants |= {word[:i] + word[i + 1] + word[i] + word[i + 2 :] for i in range(len(word) - 1)}
    if len(word) >= 3:
        variants |= {word[:i] + word[i + 1 :] for i in range(1, len(word))}
    return "(?:" + "|".join(re.escape(v) for v in sorted(variants, key=len, reverse=True)) + ")"


# "the", "my", "this" and their typos ("hte Building Blocks Castle Set seems to be defecitve")
_DETERMINERS = "|".join(_typo_tolerant(w).removeprefix("(?:").removesuffix(")") for w in ("the", "my", "this"))


def _best(templates: tuple[str, ...], texts: list[str]) -> float:
    return max((_score(t, x) for t in templates for x in texts), default=0.0)


class TicketReader:
    """Facts from observations: feed it every observation (:meth:`absorb`), ask it for the verdict."""

    def __init__(self) -> None:
        self.order: dict[str, Any] | None = None
        self.customer: dict[str, Any] | None = None
        self.book = phrasebook()

    def needs(self, obs: Observation) -> str | None:
        """The lookup still to make before the facts are complete."""
        self.absorb(obs)
        if self.order is None:
            return "order"
        if self.customer is None:
            return "customer"
        return None

    def absorb(self, obs: Observation) -> None:
        if isinstance(obs.tool_result, dict):
            if "carrier" in obs.tool_result:
                self.order = obs.tool_result
            elif "customer_id" in obs.tool_result:
                self.customer = obs.tool_result

    def order_id(self) -> str:
        assert self.order is not None
        return self.order["order_id"]

    # ------------------------------------------------------------------------------- reading

    def _mask(self, text: str, names: list[str]) -> str:
        for name in names:
            text = re.sub(rf"my order ORD-\d+ \({re.escape(name)}\)", _ITEM, text, flags=re.IGNORECASE)
            text = re.sub(
                rf"\b(?:{_DETERMINERS})\s+{re.escape(name)}(?:\s+from order ORD-\d+|\s+\(order ORD-\d+\)|\s+in order "
                r"#ORD-\d+)?",
                _ITEM,
                text,
                flags=re.IGNORECASE,
            )
        return text

    def _issue(self, texts: list[str]) -> tuple[IssueType, float]:
        scored = [
            (issue, _best(tuple(t.replace("{item}", _ITEM) for t in clauses), texts))
            for issue, clauses in self.book.issue_clauses.items()
        ]
        issue, score = max(scored, key=lambda s: s[1])
        return issue, score  # type: ignore[return-value]

    def _second_claim(self, sentences: list[str]) -> tuple[list[str], IssueType | None]:
        """The part that adds a second claim ("On top of that, it arrived broken"), read apart — wherever
        it starts (a hurried message runs its sentences together)."""
        leads = "|".join(
            r"\s+".join(_typo_tolerant(w) for w in lead.strip().rstrip(",").split())
            for lead in self.book.second_claim_leads
        )
        # the pronoun may carry a typo ("ti was already damaged")
        pattern = re.compile(rf"\b(?:{leads}),?\s+([a-z]{{1,3}}\b.*?)(?:[.!?]|$|\s+(?=i\b))", re.IGNORECASE)
        rest, second = [], None
        for sentence in sentences:
            for match in pattern.finditer(sentence):
                body = re.sub(r"^[a-z]{1,3}\b", _ITEM, match.group(1), flags=re.IGNORECASE)
                issue, score = self._issue([body])
                if score >= 90 and issue not in ("vague", "not_received", "duplicate_charge"):
                    second = issue
                    sentence = sentence[: match.start()] + " " + sentence[match.end() :]
                    break
            rest.append(sentence)
        return rest, second

    def _facts(self, obs: Observation) -> tuple[Ticket, frozenset[str]]:
        assert self.order is not None and self.customer is not None
        o = self.order
        names = [i["name"] for i in o["items"]]
        claim = self._claim(obs.customer_message, names, _IMAGES.search(obs.ticket))
        answers = [e.text for e in obs.history[1:] if e.role == "customer"]
        hidden, revealed = self._answers(answers, names, claim)
        opened = _OPENED.search(obs.ticket)
        opened_on = opened.group(1) if opened else o["order_date"]
        task = get_task(obs.task_id)
        ticket = Ticket(
            ticket_id=obs.ticket_id,
            position=0,
            split="train",
            family=task.family,
            difficulty=task.difficulty,
            presentation="days" if "days_since_delivery" in o else "dates",
            opened_on=opened_on,
            customer=_customer(self.customer),
            order=_order(o, opened_on),
            claim=claim,
            hidden=hidden,
            subject="",
            message=obs.customer_message,
        )
        return ticket, revealed

    def _claim(self, message: str, names: list[str], images: re.Match[str] | None) -> Claim:
        """The claim the first message makes: which item, the issue (and a second one), its stated use."""
        line = next((k for k, name in enumerate(names) if name.lower() in message.lower()), 0)
        sentences = [self._mask(s, names) for s in _SENTENCE.split(message) if s.strip()]
        sentences, second = self._second_claim(sentences)
        issue, _ = self._issue(sentences)
        used: bool | None = None
        if issue == "item_used":
            used = True
        elif issue in ("changed_mind", "size_issue"):
            u, n = _best(self.book.used, sentences), _best(self.book.unused, sentences)
            if max(u, n) >= 88:
                used = u > n
        return Claim(
            issue=issue,
            line=line,
            images_provided=images is not None and images.group(1) == "true",
            item_used=used,
            tone="calm",
            second_issue=second,
        )

    def _answers(self, answers: list[str], names: list[str], claim: Claim) -> tuple[HiddenFacts, frozenset[str]]:
        """What the customer's answers reveal, and which topics they settle."""
        revealed: set[str] = set()
        photos_show: Literal["damage", "normal_wear"] | None = None
        parcel_found: bool | None = None
        hidden_used: bool | None = None
        actual: IssueType | None = None
        for answer in answers:
            damage, wear = _best(self.book.damage_views, [answer]), _best(self.book.wear_views, [answer])
            if max(damage, wear) >= 90:
                photos_show = "normal_wear" if wear > damage else "damage"
                revealed.add("photos")
            found, missing = _best(self.book.found, [answer]), _best(self.book.not_found, [answer])
            if max(found, missing) >= 90:
                parcel_found = found > missing
                revealed.add("delivery")
            u, n = _best(self.book.used_answers, [answer]), _best(self.book.unused_answers, [answer])
            if max(u, n) >= 92:
                hidden_used = n < u
            if claim.issue == "vague":
                said, score = self._issue([self._mask(s, names) for s in _SENTENCE.split(answer) if s.strip()])
                if said != "vague" and score >= 90:
                    actual = said
                    revealed.add("details")
        if hidden_used is not None and claim.item_used is None:
            revealed.add("usage")
        hidden = HiddenFacts(
            photos_show=photos_show, item_used=hidden_used, parcel_found=parcel_found, actual_issue=actual
        )
        return hidden, frozenset(revealed)

    def verdict(self, obs: Observation) -> Verdict:
        ticket, revealed = self._facts(obs)
        return evaluate(ticket, revealed)


def _customer(c: dict[str, Any]) -> Customer:
    """The customer as its record shows it."""
    return Customer(
        customer_id=c["customer_id"],
        name=c["name"],
        tier=c["tier"],
        account_age_days=c["account_age_days"],
        orders_12m=c["orders_12m"],
        returns_12m=c["returns_12m"],
        chargebacks=c["chargebacks"],
        fraud_flag="fraud_review" in c["account_flags"],
    )


def _order(o: dict[str, Any], opened_on: str) -> Order:
    """The order as its record shows it, the days since delivery counted when it gives only dates."""
    days = o.get("days_since_delivery")
    if days is None and o["delivery_date"] is not None:
        days = (date.fromisoformat(opened_on) - date.fromisoformat(o["delivery_date"])).days  # P12: count it
    return Order(
        order_id=o["order_id"],
        lines=tuple(_line(i) for i in o["items"]),
        amount=o["total"],
        order_date=o["order_date"],
        delivery_date=o["delivery_date"],
        days_since_delivery=days,
        carrier_status=o["carrier"]["status"],
        days_past_estimate=o["carrier"]["days_past_estimate"],
        payment_method=o["payment"]["method"],
        charges=o["payment"]["charges"],
    )


def _line(i: dict[str, Any]) -> OrderLine:
    product = Product(
        sku=i["sku"],
        name=i["name"],
        category=i["category"],
        price=i["unit_price"],
        in_stock=i["in_stock"],
        final_sale=i["final_sale"],
        hygiene=i["hygiene"],
        perishable=i["perishable"],
        warranty_days=i["warranty_days"],
    )
    return OrderLine(product=product, quantity=i["quantity"])
