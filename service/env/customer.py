"""The scripted customer: answers a request for information from the hidden facts.

What the agent asks is read from its reply text (keywords per topic); the customer answers each
topic asked, deterministically for a ticket, and reveals only the hidden facts of those topics.
"""

from __future__ import annotations

import random
import re

from service.env import messages
from service.env.generator import stable_seed
from service.env.world import Ticket

_TOPIC_WORDS: dict[str, tuple[str, ...]] = {
    "photos": ("photo", "picture", "image", "pic ", "pics", "snapshot"),
    "usage": ("used", "worn", "wear", "washed", "condition", "unused", "tags", "packaging", "opened", "tried"),
    "delivery": ("neighbo", "porch", "delivered", "parcel", "package", "locker", "mailbox", "doorstep", "found", "reception"),
    "details": ("detail", "what happened", "describe", "explain", "more information", "clarify", "what is wrong", "what's wrong", "specific", "the problem", "the issue"),
}
_WORD_BOUNDARY = re.compile(r"\s+")


def topics_asked(question: str | None) -> frozenset[str]:
    """The information topics a question asks about (empty when the question is unclear)."""
    if not question:
        return frozenset()
    text = _WORD_BOUNDARY.sub(" ", question.lower()) + " "
    return frozenset(topic for topic, words in _TOPIC_WORDS.items() if any(w in text for w in words))


def relevant_topics(ticket: Ticket) -> frozenset[str]:
    """The topics this ticket has hidden facts for: asking about them reveals something."""
    h = ticket.hidden
    found = set()
    if h.photos_show is not None:
        found.add("photos")
    if h.item_used is not None:
        found.add("usage")
    if h.parcel_found is not None:
        found.add("delivery")
    if h.actual_issue is not None:
        found.add("details")
    return frozenset(found)


def answer(ticket: Ticket, question: str | None, round_no: int) -> tuple[str, frozenset[str]]:
    """The customer's reply to ``question`` and the hidden-fact topics it reveals."""
    topics = topics_asked(question)
    rng = random.Random(stable_seed("customer", ticket.ticket_id, round_no, ",".join(sorted(topics))))
    text = messages.render_customer_answer(
        rng, topics=topics, hidden=ticket.hidden, claim=ticket.claim, order=ticket.order
    )
    return text, topics & relevant_topics(ticket)
