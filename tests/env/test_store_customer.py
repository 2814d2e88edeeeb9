"""The store desk's customer: answers what it is asked and only that, in words of its own, gives its
identity (an old postcode first, when it moved), changes its mind once, pushes back once after a refusal."""

from __future__ import annotations

import re

import pytest

from service.env import PUBLIC
from service.env.store.customer import TOPICS, Memory, reply, topics_in
from service.env.store.messages import nouns
from service.env.store.world import StoreTicket


def nouns_of(name: str) -> tuple[str, ...]:
    return nouns().get(name, ())


FRESH = Memory(round=0, identity_asks=0, mind_changed=False, insisted=False)
TICKETS = [PUBLIC.store_ticket(tid) for d in ("easy", "medium", "hard") for tid in PUBLIC.pool("dev", "store", d)]


def _sentences(text: str) -> set[str]:
    return {s.strip().lower() for s in re.split(r"(?<=[.!?])\s+|\n+", text) if len(s.strip()) > 25}


@pytest.mark.parametrize("topic", [t for t in TOPICS if t != "confirmation"])
def test_an_answer_reveals_at_most_what_was_asked_and_never_repeats_the_message(topic: str) -> None:
    for t in TICKETS:
        answer = reply(t, "Thanks for writing in.", (topic,), FRESH)
        assert answer.revealed <= {topic}, (t.ticket_id, topic, answer.revealed)
        assert not _sentences(answer.text) & _sentences(t.message), (t.ticket_id, answer.text)


def test_identity_answers_carry_the_accounts_details_and_a_mover_gives_an_old_postcode_first() -> None:
    movers = [t for t in TICKETS if t.hidden.wrong_postcode_first]
    assert movers
    for t in TICKETS:
        first = reply(t, "Could you confirm your email address and postcode?", (), FRESH)
        postcode = t.db.account.addresses[0].postal_code
        assert t.db.account.email in first.text
        if t in movers:
            assert postcode not in first.text and "identity" not in first.revealed
            again = reply(
                t, "That postcode does not match. Could you check it?", ("identity",), Memory(1, 1, False, False)
            )
            assert postcode in again.text and "identity" in again.revealed
        else:
            assert postcode in first.text and "identity" in first.revealed


def _mind_changers() -> list[StoreTicket]:
    every = [t for split in ("train", "dev") for t in PUBLIC.store_tickets(split)]
    return [t for t in every if any(r.mind_change for r in t.requests)]


def test_a_change_of_mind_concerns_a_request_granted_with_a_replacement_or_a_refund_it_changes() -> None:
    """Never a declined or escalated request, never one whose remedy the change would not change."""
    from service.env.store.policy import decide

    changers = _mind_changers()
    assert len(changers) >= 8
    for t in changers:
        (i, r), *more = [(i, r) for i, r in enumerate(t.requests) if r.mind_change]
        assert not more, t.ticket_id
        after = decide(t).outcomes[i]
        before_ticket = t.model_copy(
            update={"requests": tuple(x.model_copy(update={"mind_change": None}) for x in t.requests)}
        )
        before = decide(before_ticket).outcomes[i]
        kinds = {e.kind for e in after.effects}
        assert after.granted and "escalate" not in kinds, (t.ticket_id, after)
        want = {"refund": "refund", "replacement": "replace"}[r.mind_change]
        assert want in kinds and want not in {e.kind for e in before.effects}, (t.ticket_id, before, after)


def test_the_customer_changes_their_mind_when_the_agent_proposes_that_item_and_says_which_item() -> None:
    for t in _mind_changers():
        r = next(r for r in t.requests if r.mind_change)
        order = t.db.order(r.order_id)
        line = order.line(r.lines[0][0])
        first = "a replacement" if r.mind_change == "refund" else "a refund"
        others = [x for x in t.requests if x is not r and x.lines]
        if others:  # a yes asked about another request only is a yes
            o = t.db.order(others[0].order_id)
            other = o.line(others[0].lines[0][0])
            if not set(other.name.lower().split()) & set(line.name.lower().split()):
                about_other = reply(t, f"I'll sort out the {other.name} for you. Shall I go ahead?", (), FRESH)
                assert about_other.confirmed and not about_other.mind_changed, (t.ticket_id, about_other.text)
        said = reply(t, f"I'll arrange {first} for the {line.name}. Shall I go ahead?", (), FRESH)
        assert not said.confirmed and said.mind_changed and "preference" in said.revealed, (t.ticket_id, said)
        nouns = [line.name.lower(), *(n.lower() for n in nouns_of(line.name))]
        assert any(n in said.text.lower() for n in nouns), (t.ticket_id, said.text)
        by_line = reply(t, f"I'll arrange {first} for line {line.line_no} of {order.order_id}. Is that OK?", (), FRESH)
        assert by_line.mind_changed and not by_line.confirmed, (t.ticket_id, by_line.text)
        again = reply(t, "Understood, I'll do that instead. Shall I go ahead?", (), Memory(1, 0, True, False))
        assert again.confirmed


def test_an_insisting_customer_pushes_back_once_after_a_refusal() -> None:
    t = next(t for t in TICKETS if t.writer.insists)
    refusal = "I'm sorry, but we can't accept this return: it is outside our 30-day window."
    pushed = reply(t, refusal, (), FRESH)
    assert pushed.insisted and not pushed.revealed and not pushed.confirmed
    calm = reply(t, refusal, (), Memory(1, 0, False, True))
    assert not calm.insisted or calm.text != pushed.text


def test_natural_confirmation_and_identity_questions_are_understood() -> None:
    for text in (
        "Would you like me to go ahead with the refund?",
        "Is it OK if I proceed?",
        "Shall I process this now?",
        "I can refund $12.00 to your card. Does that work for you?",
    ):
        assert "confirmation" in topics_in(text), text
    for text in ("Could you confirm the email address on your account?", "What's your postcode?"):
        assert topics_in(text) == {"identity"}, text


def test_answers_are_deterministic() -> None:
    for t in TICKETS[:30]:
        a = reply(t, "Could you send a photo, and your postcode?", (), FRESH)
        b = reply(t, "Could you send a photo, and your postcode?", (), FRESH)
        assert a == b


PLAN = "I'll refund $45.00 to your Visa ending 4242 for the lamp and open a prepaid return. "
ASKS_FOR_A_YES = (
    "Would that work for you?",
    "Are you OK with that?",
    "Can you confirm?",
    "Let me know if you agree.",
    "Does that sound OK?",
    "Is that alright with you?",
    "Happy for me to go ahead?",
    "Shall I proceed?",
    "Do I have your go-ahead?",
    "Could you confirm you're happy with this?",
    "Please reply yes to confirm.",
    "Just say the word and I'll process it.",
    "If you're happy with that, let me know and I'll do it.",
    "Would you like me to do that?",
    "Are you happy for me to process this refund?",
    "Okay to go ahead?",
    "Can I go ahead and process that?",
    "Does this work for you?",
    "Is this acceptable?",
    "Do you agree to this?",
    "Let me know if that's OK.",
    "Please confirm and I'll get it done.",
    "Are you happy with this plan?",
    "Would you like to proceed?",
    "Do you want me to go ahead?",
    "Can I take that as a yes?",
    "Is that what you'd like?",
    "Would that be OK?",
    "May I proceed with this?",
    "Please let me know if you'd like me to proceed.",
    "Shall I?",
    "Good to go?",
    "Is that fine by you?",
    "Sound good?",
    "Are you comfortable with that?",
    "I just need your OK before I make the change.",
)
ASKS_SOMETHING_ELSE = (
    ("Could you confirm your email address and postcode?", {"identity"}),
    ("Can you send me a photo of the damage?", {"photos"}),
    ("Is there anything else I can help you with?", set()),
    ("Would you prefer a refund or a replacement?", {"preference"}),
    ("Which size would you like instead?", {"preference"}),
    ("Thanks, I've now processed the refund.", set()),
    ("Let me know if you have any other questions.", set()),
    ("Can I help with anything else today?", set()),
    ("Do you have the order number?", {"order"}),
    ("I hope that helps!", set()),
)


@pytest.mark.parametrize("question", ASKS_FOR_A_YES)
def test_a_request_for_a_yes_is_understood_in_natural_words(question: str) -> None:
    assert "confirmation" in topics_in(PLAN + question), question


@pytest.mark.parametrize(("text", "topics"), ASKS_SOMETHING_ELSE)
def test_other_questions_and_statements_ask_for_no_yes(text: str, topics: set[str]) -> None:
    asked = topics_in(text)
    assert "confirmation" not in asked and topics <= asked, (text, asked)


WHERE_WORDS = {
    "door": r"\b(?:door|porch|bins|outside|garden|plant pot|doormat|recycling)\b",
    "neighbour": r"\b(?:neighbours?|next door)\b",
    "locker": r"\blocker\b",
    "signed": r"\bsign(?:ed|ature)\b",
}


def test_a_customer_who_checks_for_a_parcel_looks_where_the_carrier_says_it_was_left() -> None:
    """The tracking's delivery event and the customer's account agree (no 'someone in the building signed for
    it' when the carrier left it in a locker)."""
    from service.env.store.policy import shipment_of
    from service.env.store.world import DELIVERED_WHERE

    checked = 0
    for t in [t for split in ("train", "dev") for t in PUBLIC.store_tickets(split)]:
        if t.hidden.parcel_found is None:
            continue
        r = next(r for r in t.requests if r.kind == "missing")
        shipment = shipment_of(t.db.order(r.order_id), r.lines[0][0])
        where = DELIVERED_WHERE[shipment.events[-1].detail]
        said = reply(t, "Could you check with your neighbours and around the house?", ("delivery",), FRESH).text
        assert re.search(WHERE_WORDS[where], said.lower()), (where, said)
        for other, words in WHERE_WORDS.items():
            if other != where and other != "door":
                assert not re.search(words, said.lower()), (where, said)
        checked += 1
    assert checked >= 10
