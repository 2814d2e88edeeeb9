"""Customer text: the first message of a ticket and the scripted replies to ``request_info``.

Both functions are pure: all variety comes from the ``random.Random`` passed in, so the same
seed always yields the same text. Phrasing depends only on the claim (issue, a second claim,
photos, usage, tone, a side remark, the customer's own recollection of when it arrived — drawn
independently of the records), the product (name, category), the order id and the customer's first
name — never on price, stock, final sale, warranty, carrier status, the recorded dates or the
customer's history, so no phrase can leak the gold decision. Those facts reach the agent through
the ticket header and lookups (and the records decide when the customer remembers wrong: P12).
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence

from service.env.world import INFO_TOPICS, Claim, Customer, HiddenFacts, IssueType, Order, Product, Ticket

__all__ = ["inconsistencies", "render_customer_answer", "render_message"]

_SOFT_GOODS = frozenset({"apparel", "footwear"})
_TYPO_RATE = 0.08  # share of eligible words that get one typo in ``typos`` tone

# --------------------------------------------------------------------------------------------
# Issue clauses. Each is an independent clause with ``{item}`` (the product, sometimes with the
# order id) so it can follow "Unfortunately, " / "I think " / "I can't believe ".
# Tags after "|" restrict a clause: hard/soft (product category), elec (electronics only),
# use (implies the item was used, so skipped when the claim says it is unused).
# --------------------------------------------------------------------------------------------
_ISSUE_CLAUSES: dict[str, tuple[str, ...]] = {
    "damaged": (
        "{item} arrived broken",
        "{item} arrived damaged",
        "{item} was already damaged inside the box",
        "the box was crushed and {item} inside is damaged",
        "{item} came cracked|hard",
        "{item} turned up smashed|hard",
        "{item} arrived with a big dent in it|hard",
        "{item} was in pieces when the parcel came|hard",
        "{item} arrived torn|soft",
        "{item} came with a rip down one side|soft",
    ),
    "defective": (
        "{item} is faulty",
        "{item} doesn't work properly",
        "{item} seems to be defective",
        "there's a fault with {item}",
        "{item} has a manufacturing fault",
        "{item} stopped working|use",
        "{item} won't turn on|elec",
        "{item} won't charge at all|elec",
        "{item} keeps switching itself off|elec use",
    ),
    "wrong_item": (
        "I received the wrong item instead of {item}",
        "{item} turned out to be the wrong colour",
        "I was sent the wrong size of {item}",
        "I ordered {item} but a completely different product came",
        "{item} came in a different colour from the one I picked",
        "you sent me something else instead of {item}",
        "I ordered {item} and got a different model",
    ),
    "not_received": (
        "{item} never arrived",
        "I'm still waiting for {item}",
        "I haven't received {item}",
        "{item} hasn't turned up",
        "there's been no sign of {item}",
        "{item} never showed up at my door",
        "I never got {item}",
    ),
    "size_issue": (
        "{item} is too small",
        "{item} is too big",
        "{item} doesn't fit",
        "{item} is way too tight",
        "{item} comes up large and doesn't fit me",
        "{item} is a size too small for me",
        "{item} is far too loose on me",
    ),
    "changed_mind": (
        "I've changed my mind about {item}",
        "I don't want {item} anymore",
        "I ordered {item} by mistake",
        "I found {item} cheaper elsewhere",
        "I no longer need {item}",
        "I accidentally ordered {item}",
        "I've decided I don't need {item} after all",
    ),
    "item_used": (
        "I've used {item} for a while and I just don't like it",
        "I tried {item} for a while and it's not for me",
        "I've been using {item} and honestly I don't like it",
        "after trying {item} for a while I've decided it's not for me",
        "I gave {item} a proper try and didn't like it",
        "I've used {item} a few times but it doesn't suit me",
        "I've worn {item} a few times and I don't like it|soft",
    ),
    "duplicate_charge": (
        "I was charged twice for {item}",
        "there are two payments for {item} on my statement",
        "my card was billed twice for {item}",
        "I've been charged double for {item}",
        "the payment for {item} was taken two times",
        "you took the money for {item} twice",
    ),
    # Deliberately says nothing about what the problem is.
    "vague": (
        "something is wrong with {item}",
        "I'm not happy with {item}",
        "there's a problem with {item}",
        "{item} isn't right",
        "I have an issue with {item}",
        "I'm really unhappy about {item}",
        "I need help with {item}, this isn't okay",
    ),
}

# Side remarks of multi-issue messages: complaints that are not claims and change nothing (P13).
_REMARKS: dict[str, tuple[str, ...]] = {
    "slow_delivery": ("the delivery took ages to get here", "it came days later than promised"),
    "second_contact": ("this is the second time I've had to write to you", "nobody answered my last email"),
    "service": ("your chat line kept me waiting for an hour", "I'm not impressed with the service so far"),
}
_REMARK_LEADS = ("Also, ", "Oh and ", "On top of that, ", "Plus ", "And ")
# A second claim about the same item (P13 decides which counts): only clauses that start with the item.
_SECOND_CLAIM_LEADS = ("On top of that, ", "And to make it worse, ", "Also, ", "What's more, ")
# The customer's own recollection of the delivery; the records decide (P12).
_ARRIVED = ("I got it {when}", "it arrived {when}", "it was delivered {when}", "it came {when}")
_SEVERAL_ITEMS = (
    "It's one of the items in my order.",
    "The rest of the order is fine.",
    "Only this item, the others are fine.",
    "The other things in the parcel are okay.",
)

_PHOTO_SENTENCES = (
    "I've attached photos.",
    "Pictures are attached.",
    "Please see the attached images.",
    "I took some photos, they're attached.",
    "I've included a few pictures so you can see.",
    "Photos attached.",
    "I'm attaching some pics.",
)
_PHOTO_SENTENCES_SHORT = ("photos attached", "pics attached", "attached some pictures")

# Usage clauses (lowercase, no final punctuation); tags as above plus "sealed" (only where an
# unopened item makes sense) and "soft"/"apparel".
_USED_CLAUSES = (
    "I have used it a few times",
    "it has been used",
    "I opened it and tried it out",
    "I did use it a bit",
    "I've been using it",
    "I've worn it a couple of times|soft",
    "I wore it once|soft",
    "I've washed it and worn it|apparel",
)
_UNUSED_CLAUSES = (
    "I haven't used it",
    "it's never been used",
    "it's still in its original packaging",
    "it's unused and I kept all the packaging",
    "it's completely unused",
    "the tags are still on|soft",
    "I only tried it on, the tags are still on|soft",
    "it's still unopened|sealed",
)
_SEALED_ISSUES = frozenset({"changed_mind", "duplicate_charge", "not_received"})

# --------------------------------------------------------------------------------------------
# Tone-specific framing.
# --------------------------------------------------------------------------------------------
_OPENINGS = {
    "calm": (
        "Hi,",
        "Hello,",
        "Hi there,",
        "Good morning,",
        "Dear support team,",
        "Hello team,",
        "Hi, hope you're well.",
        "Hello, I hope you can help.",
        "To whom it may concern,",
        "",
    ),
    "angry": (
        "Hello.",
        "Right.",
        "I am FURIOUS.",
        "This is UNACCEPTABLE.",
        "Hi.",
        "Seriously?!",
        "I can't believe this.",
        "Listen.",
        "",
    ),
    "vague": ("hi", "hey", "hello", "hi there", "um hi", "hey,", "hello?", ""),
}
_ORDER_LINES = {
    "calm": (
        "I'm writing about order {oid}.",
        "This is about my order {oid}.",
        "My order number is {oid}.",
        "I need help with order {oid}.",
    ),
    "angry": ("Order {oid}.", "About order {oid}!", "My order number is {oid}."),
    "vague": ("order {oid}", "its order {oid}", "re order {oid}"),
}
_ISSUE_PREFIXES = {
    "calm": ("", "", "Unfortunately, ", "I'm sorry to say ", "I'm afraid ", "I'm writing because ", "Sadly, "),
    "angry": ("", "", "Unbelievably, ", "I can't believe ", "So ", "Honestly, "),
    "vague": ("", "i think ", "not sure but ", "so um ", "it seems like ", "basically "),
}
_ISSUE_SUFFIXES = {"calm": (".",), "angry": ("!", "!!", "!!!"), "vague": ("", ".", "...", "?")}
_ANGRY_OUTBURSTS = (
    "This is COMPLETELY unacceptable!",
    "What a JOKE.",
    "I expected MUCH better from you.",
    "Absolutely RIDICULOUS!",
    "How hard can it be?!",
    "I am NOT impressed.",
)
_REVIEW_THREATS = (
    "If this isn't fixed I'm leaving a terrible review.",
    "Sort it out or I'll write a one-star review everywhere I can.",
    "Don't make me leave a bad review.",
    "Everyone is going to hear about this in my review!",
    "Fix it or I'm posting a scathing review.",
    "I'll be telling everyone in my review how badly this went.",
)
_ASKS_BY_ISSUE: dict[str, tuple[str, ...]] = {
    "damaged": ("Can you send a replacement or refund me?", "I'd like a replacement or my money back."),
    "defective": ("Can you replace it or refund me?", "Could you sort out a replacement?"),
    "wrong_item": ("Can you send the right one?", "How do I swap it for what I actually ordered?"),
    "not_received": ("Can you resend it or refund me?", "Where is my parcel?"),
    "size_issue": ("Can I swap it for another size?", "Could I exchange it?"),
    "changed_mind": ("Can I send it back?", "How do I return it?"),
    "item_used": ("Can I return it?", "I'd like to send it back for a refund."),
    "duplicate_charge": ("Please refund the extra payment.", "Can you reverse the second charge?"),
    "vague": ("What are my options?", "Please sort it out.", "What can you do about it?"),
}
_ASKS_GENERIC = {
    "calm": (
        "Could you help me with this?",
        "What can you do?",
        "Please let me know what my options are.",
        "I'd like this sorted out, please.",
        "How should I proceed?",
        "Could you advise?",
    ),
    "angry": (
        "I want this fixed NOW!",
        "Sort it out IMMEDIATELY!",
        "Fix this today!",
        "I expect a proper answer!",
        "Do something about it!",
    ),
    "vague": ("what do i do", "can you help", "what now?", "help?", "pls sort"),
}
_CLOSINGS = {
    "calm": (
        "Thanks.",
        "Thank you.",
        "Thanks in advance.",
        "Many thanks.",
        "Kind regards,",
        "Best,",
        "Cheers,",
        "Thanks for your help.",
        "Looking forward to hearing from you.",
        "",
    ),
    "angry": (
        "Waiting for your answer.",
        "Fix it.",
        "Regards.",
        "Do better.",
        "I expect a reply TODAY.",
        "Not happy.",
        "",
    ),
    "vague": ("thx", "thanks", "ok thanks", "cheers", "", ""),
}
_VAGUE_HEDGES = ("not sure if that matters", "i guess", "or something", "if that makes sense")

_SUBJECTS_BY_ISSUE: dict[str, tuple[str, ...]] = {
    "damaged": ("Damaged item", "Item arrived broken", "Broken on arrival"),
    "defective": ("Faulty item", "Product not working", "Defective product"),
    "wrong_item": ("Wrong item received", "Wrong product sent", "Not what I ordered"),
    "not_received": ("Order not received", "Where is my parcel?", "Still waiting for my order"),
    "size_issue": ("Size doesn't fit", "Wrong fit", "Exchange for another size"),
    "changed_mind": ("Return request", "I'd like to return this", "Changed my mind"),
    "item_used": ("Return request", "Returning an item", "Not for me"),
    "duplicate_charge": ("Charged twice", "Double charge", "Two payments taken"),
    "vague": (),
}
_SUBJECTS_GENERIC = ("Order help", "Problem with my order", "Help needed", "Question about my order", "Support request")


# --------------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------------
def render_message(rng: random.Random, *, customer: Customer, order: Order, claim: Claim) -> tuple[str, str]:
    """Return ``(subject, body)`` of the customer's first message about ``order``.

    The body states the issue (or, for ``vague``, deliberately not), whether photos are attached,
    the item's condition when the claim says it, the product name and usually the order id, in a
    voice set by ``claim.tone``. ``typos`` renders exactly the ``calm`` text for the same rng and
    then adds character noise that never touches the order id, the product name or digits.

    The parts are drawn from ``rng`` in a fixed order (the published tickets are these draws).
    """
    style = _style_of(claim.tone)
    product = order.lines[claim.line].product
    oid = order.order_id if rng.random() < 0.8 else None
    placement = rng.choice(("opening", "item", "trailer")) if oid else None

    opening = rng.choice(_OPENINGS[style])
    order_line = _fmt(rng.choice(_ORDER_LINES[style]), oid=oid) if placement == "opening" else ""
    item = _item_ref(rng, product.name, oid if placement == "item" else None)

    issue, facts = _issue_and_facts(rng, style, claim, order, product, item)
    secondary = _secondary(rng, style, claim, product)
    ask, extra = _ask_and_extra(rng, style, claim)
    core = _arranged(rng, issue, secondary, facts, ask, extra)
    head = " ".join(s for s in (opening, order_line) if s)
    body = _body(rng, style, customer, head, core, oid if placement == "trailer" else None)

    subject = _subject(rng, style, claim, oid)
    if claim.tone == "typos":
        protected = _protected_words(order, customer)
        body = _add_typos(rng, body, protected)
        subject = _restore(subject.lower(), oid)
    return subject, body


def _issue_and_facts(
    rng: random.Random, style: str, claim: Claim, order: Order, product: Product, item: str
) -> tuple[str, list[str]]:
    """The issue sentence, and the fact sentences that follow it (in a random order)."""
    issue = _issue_sentence(rng, style, claim, product, item)
    facts = []
    usage = _usage_clause(rng, claim, product)
    if usage is not None:
        facts.append(_sentence(usage, style))
    if claim.images_provided:
        facts.append(rng.choice(_PHOTO_SENTENCES_SHORT) if style == "vague" else rng.choice(_PHOTO_SENTENCES))
    if claim.stated_days_ago is not None:
        facts.append(_sentence(rng.choice(_ARRIVED).format(when=_ago(claim.stated_days_ago)), style))
    if len(order.lines) > 1 and claim.issue not in ("not_received", "duplicate_charge"):
        facts.append(_sentence(rng.choice(_SEVERAL_ITEMS).rstrip("."), style))
    rng.shuffle(facts)
    # Sometimes fold the usage clause into the issue sentence: "X arrived cracked, and it's unused."
    if usage is not None and style == "calm" and rng.random() < 0.3:
        facts.remove(_sentence(usage, style))
        issue = issue[:-1] + ", and " + usage + "."
    return issue, facts


def _secondary(rng: random.Random, style: str, claim: Claim, product: Product) -> str:
    """A second claim ("On top of that, it arrived broken") and a remark, when the claim has them."""
    secondary = ""
    if claim.second_issue is not None:
        starts = [c for c in _fitting_clauses(claim.second_issue, product, claim.item_used) if c.startswith("{item}")]
        secondary = _sentence(rng.choice(_SECOND_CLAIM_LEADS) + _fmt(rng.choice(starts), item="it"), style)
    if claim.remark is not None:
        remark = _sentence(rng.choice(_REMARK_LEADS) + rng.choice(_REMARKS[claim.remark]), style)
        secondary = f"{secondary} {remark}".strip()
    return secondary


def _ask_and_extra(rng: random.Random, style: str, claim: Claim) -> tuple[str, list[str]]:
    """What the customer asks for, and the outbursts or hedges of its voice."""
    ask = rng.choice(_ASKS_BY_ISSUE[claim.issue] + _ASKS_GENERIC[style])
    if style == "vague" and ask[-1] in ".!":
        ask = ask[:-1].lower()
    extra = []
    if style == "angry":
        extra.append(rng.choice(_ANGRY_OUTBURSTS))
        if rng.random() < 0.9:
            extra.append(rng.choice(_REVIEW_THREATS))
    elif style == "vague" and rng.random() < 0.4:
        extra.append(rng.choice(_VAGUE_HEDGES))
    return ask, extra


def _arranged(
    rng: random.Random, issue: str, secondary: str, facts: list[str], ask: str, extra: list[str]
) -> list[str]:
    """Several sentence orders: facts before or after the ask, outbursts anywhere after the issue."""
    order_kind = rng.randrange(4)
    if order_kind == 0:
        core = [issue, secondary, *facts, ask, *extra]
    elif order_kind == 1:
        core = [issue, secondary, ask, *facts, *extra]
    elif order_kind == 2:
        core = [issue, *extra, secondary, *facts, ask]
    else:
        core = [*facts[:1], issue, secondary, *facts[1:], *extra, ask]
    return [s for s in core if s]


def _body(
    rng: random.Random, style: str, customer: Customer, head: str, core: list[str], trailer_oid: str | None
) -> str:
    """The sentences in paragraphs, the sign-off, and the order id as a trailer when it goes there."""
    closing = rng.choice(_CLOSINGS[style])
    name = customer.name.split()[0] if customer.name.strip() and rng.random() < 0.6 else ""
    # drawn whether or not it is used, so the draws after it do not depend on where the order id goes
    trailer = _fmt(rng.choice(("Order: {oid}", "Order number: {oid}", "Ref {oid}", "(order {oid})")), oid=trailer_oid)
    if style == "vague":
        blocks = [" ".join([head, *core]).strip()]
    elif rng.random() < 0.5:
        blocks = [head, " ".join(core)]
    else:
        split = max(1, len(core) // 2)
        blocks = [head, " ".join(core[:split]), " ".join(core[split:])]
    blocks.append("\n".join(s for s in (closing, name) if s))
    if trailer_oid is not None:
        blocks.append(trailer)
    return "\n\n".join(b for b in blocks if b)


def render_customer_answer(
    rng: random.Random, *, topics: frozenset[str], hidden: HiddenFacts, claim: Claim, order: Order
) -> tuple[str, frozenset[str]]:
    """The scripted customer's reply to the agent's request for information, and the hidden-fact
    topics the reply states.

    ``topics`` is what the agent asked about, a subset of :data:`~service.env.world.INFO_TOPICS`; each is answered
    in that fixed order from the hidden facts, and only what was asked is stated. A topic with
    nothing hidden gets a reply that refers to the first message and says nothing of the claim. An
    empty set means the question was unclear: the reply asks what is needed and reveals nothing.
    """
    unknown = set(topics) - set(INFO_TOPICS)
    if unknown:
        raise ValueError(f"unknown answer topics {sorted(unknown)}; expected a subset of {INFO_TOPICS}")
    style = _style_of(claim.tone)
    product = order.lines[claim.line].product
    stated: set[str] = set()
    if not topics:
        parts = [rng.choice(_CONFUSED[style])]
    else:
        parts = []
        for topic in INFO_TOPICS:  # fixed order: frozenset iteration order is hash-salted
            if topic in topics:
                text, facts = _ANSWERERS[topic](rng, hidden, claim, product, order.days_since_delivery)
                parts.append(text)
                stated |= facts
    if style == "angry" and topics:
        parts.insert(0, rng.choice(("Fine.", "Again?!", "I already told you!", "OK, FINE.")))
        parts.append(rng.choice(("Now sort it out!", "Can you PLEASE fix this now?", "Hurry up!")))
    elif style == "calm" and topics and rng.random() < 0.6:
        parts.append(rng.choice(("Thanks.", "Hope that helps.", "Let me know if you need anything else.")))
    text = " ".join(parts)
    if style == "vague":
        text = text[0].lower() + text[1:]
    if claim.tone == "typos":
        text = _add_typos(rng, text, _protected_words(order, None))
    return text, frozenset(stated)


def inconsistencies(ticket: Ticket) -> list[str]:
    """What makes a drawn ticket incoherent (the generator redraws it): facts and text must agree."""
    problems = []
    claim, order = ticket.claim, ticket.order
    # A parcel the customer says never arrived cannot also have come slowly or on a remembered day,
    # whatever the carrier reports ("never arrived… It arrived a week ago").
    arrived_for_customer = order.carrier_status == "delivered" and claim.issue != "not_received"
    if claim.remark == "slow_delivery" and not arrived_for_customer:
        problems.append("a slow-delivery remark on a parcel that never arrived")
    if claim.stated_days_ago is not None and not arrived_for_customer:
        problems.append("the customer recalls a delivery that never happened")
    if claim.issue == "not_received" and claim.second_issue is not None:
        problems.append("a second claim about an item that never arrived")
    if claim.images_provided and not re.search(r"photo|picture|image|pics?\b|attach", ticket.message, re.IGNORECASE):
        problems.append("photos attached but the message never says so")
    days = order.days_since_delivery
    if ticket.hidden.photos_show == "normal_wear" and days is not None and days < 10:
        problems.append("ordinary wear on an item delivered days ago")
    if claim.issue in ("size_issue",) and ticket.product.category not in _SOFT_GOODS:
        problems.append("a size claim on an item that has no size")
    return problems


# --------------------------------------------------------------------------------------------
# Answers
# --------------------------------------------------------------------------------------------
_CONFUSED = {
    "calm": (
        "Sorry, what exactly do you need from me?",
        "I'm not sure what you're asking for — could you clarify?",
        "Could you tell me what information you need?",
        "I don't quite understand the question. What should I send you?",
    ),
    "angry": (
        "What exactly do you need from me?!",
        "I don't understand what you're asking. Just tell me what you want!",
        "What is that supposed to mean? Be specific!",
    ),
    "vague": ("what do you need?", "huh, not sure what you mean", "sorry what info?", "what do you mean exactly"),
}

_DAMAGE_VIEWS = {
    "hard": (
        "you can see the crack right across the front",
        "you can clearly see the dent in the side",
        "it shows where it's smashed at the corner",
        "you can see the broken pieces in the box",
    ),
    "soft": (
        "you can see the tear along the seam",
        "you can clearly see the rip in the fabric",
        "it shows the hole where it was torn",
    ),
}
_DEFECT_VIEWS = {
    "electronics": (
        "you can see the screen stays black when I press the power button",
        "it shows the error light flashing and nothing else happening",
        "you can see it's completely dead even when plugged in",
    ),
    "other": (
        "you can see the part that doesn't work properly",
        "it shows the fault clearly",
        "you can see the mechanism is faulty straight out of the box",
    ),
}
_WEAR_VIEWS = {
    "footwear": (
        "the soles are worn down from {period} of walking in them, but they shouldn't fall apart like this",
        "there are scuffs all over the toes and the heels are worn after {period} of wear, but it's still faulty",
        "the insoles are flattened and the treads are smooth from {period} of daily use, but they should last longer",
    ),
    "apparel": (
        "the colour has faded after {period} of washing, but it's obviously a faulty fabric",
        "the fabric is pilled and stretched from wearing it for {period}, but that shouldn't happen",
        "it's a bit faded and bobbly from {period} of regular washing and wearing, but it's clearly defective",
    ),
    "electronics": (
        "the casing is scratched and scuffed from {period} of everyday use, but it's still faulty",
        "the buttons are worn shiny and there are scratches from {period} of daily use, but it shouldn't be like this",
        "the finish has worn off the edges after {period} of use, but it's clearly a defect",
    ),
    "other": (
        "there are scuffs and marks from {period} of everyday use, but it's clearly faulty",
        "it looks a bit worn and faded after {period} of regular use, but it shouldn't be like this",
        "the surface is scratched and worn from use over {period}, but it's still defective",
    ),
}
_PHOTO_LEADS = ("Here are the photos — ", "I've attached photos: ", "Pictures attached, ", "Sending photos now — ")
Answer = tuple[str, frozenset[str]]


def _period(days: int | None) -> str:
    """How long the item has been used, in words that fit the delivery date."""
    if days is None or days <= 21:
        return "a couple of weeks"
    if days <= 60:
        return "several weeks"
    return "months"


def _answer_photos(rng: random.Random, hidden: HiddenFacts, claim: Claim, product: Product, days: int | None) -> Answer:
    lead = rng.choice(_PHOTO_LEADS)
    if hidden.photos_show == "damage":
        issue = claim.issue if claim.issue in ("damaged", "defective") else hidden.actual_issue or claim.second_issue
        views: tuple[str, ...]
        if issue == "defective":
            views = _DEFECT_VIEWS["electronics" if product.category == "electronics" else "other"]
        else:
            views = _DAMAGE_VIEWS["soft" if product.category in _SOFT_GOODS else "hard"]
        return lead + rng.choice(views) + ".", frozenset({"photos"})
    if hidden.photos_show == "normal_wear":
        key = product.category if product.category in _WEAR_VIEWS else "other"
        return lead + rng.choice(_WEAR_VIEWS[key]).format(period=_period(days)) + ".", frozenset({"photos"})
    if claim.images_provided:  # the header says so too: nothing new
        return rng.choice(
            ("I already attached photos to my first message.", "The photos are in my first message.")
        ), frozenset()
    return _nothing_to_add(rng, "photos"), frozenset()


_USED_ANSWERS = ("Yes, I have used it a few times.", "Honestly, yes — I used it for a while before this.")
_USED_ANSWERS_HARD = ("I did use it, yes.", "OK, I admit it has been used.")
_USED_ANSWERS_SOFT = ("I did wear it a few times, yes.", "Yes, I've worn it and washed it.")
_UNUSED_ANSWERS = (
    "No, it's never been used — still in the original packaging.",
    "It's completely unused, everything is still in the box.",
    "I haven't used it, it's exactly as it arrived.",
)
_UNUSED_ANSWERS_HARD = ("Not used at all, it's still sealed in the packaging.",)
_UNUSED_ANSWERS_SOFT = ("Not used at all, the tags are still on.",)
_FOUND_PLACES = (
    "my neighbour had it all along",
    "it was behind the bins by the side door",
    "it was sitting in the parcel locker",
    "the building reception had it in the back",
)
_FOUND = "Good news — I checked again and {where}. Sorry for the trouble!"
_NOT_FOUND = (
    "I've asked all my neighbours and checked with reception — nothing. Nobody here signed for it.",
    "I checked the porch, the bins, the neighbours and the building reception. It's not there and nobody signed for "
    "anything.",
    "Nothing anywhere: not with the neighbours, not at reception, not on the porch. No one signed for it.",
)


def _answer_usage(rng: random.Random, hidden: HiddenFacts, claim: Claim, product: Product, days: int | None) -> Answer:
    used = hidden.item_used
    soft = product.category in _SOFT_GOODS
    if used is True:
        return rng.choice(_USED_ANSWERS + (_USED_ANSWERS_SOFT if soft else _USED_ANSWERS_HARD)), frozenset({"usage"})
    if used is False:
        return rng.choice(_UNUSED_ANSWERS + (_UNUSED_ANSWERS_SOFT if soft else _UNUSED_ANSWERS_HARD)), frozenset(
            {"usage"}
        )
    return _nothing_to_add(rng, "usage"), frozenset()


def _answer_delivery(
    rng: random.Random, hidden: HiddenFacts, claim: Claim, product: Product, days: int | None
) -> Answer:
    if hidden.parcel_found is True:
        return _FOUND.format(where=rng.choice(_FOUND_PLACES)), frozenset({"delivery"})
    if hidden.parcel_found is False:
        return rng.choice(_NOT_FOUND), frozenset({"delivery"})
    return _nothing_to_add(rng, "delivery"), frozenset()


def _answer_details(
    rng: random.Random, hidden: HiddenFacts, claim: Claim, product: Product, days: int | None
) -> Answer:
    """What the problem is — only when the first message did not say (a vague claim). The answer states
    that one fact and nothing else: never the claim restated, never the item's use volunteered."""
    issue = hidden.actual_issue
    if issue is None:
        return _nothing_to_add(rng, "details"), frozenset()
    lead = rng.choice(("To be clear, ", "Sorry, I should have said: ", "What happened is ", "OK, so "))
    item = rng.choice(("the " + product.name, "my " + product.name))
    clause = _fmt(rng.choice(_fitting_clauses(issue, product, claim.item_used)), item=item)
    out = lead + clause + "."
    return out[0].upper() + out[1:], frozenset({"details"})


# What the customer says when asked about something it has nothing hidden about: it refers to its first
# message and says nothing of the claim, so a question can never stand in for reading the message.
_NOTHING_TO_ADD = {
    "photos": ("I don't have any photos to add, sorry.", "I haven't got anything more to show you."),
    "usage": (
        "I've told you what I can about that in my first message.",
        "I don't have anything to add there, it's all in my first message.",
    ),
    "delivery": ("I've nothing new to tell you about the delivery.", "Nothing to add about the delivery."),
    "details": (
        "I've explained it in my first message, I don't know what else to add.",
        "It's all in my first message, really.",
    ),
}


def _nothing_to_add(rng: random.Random, topic: str) -> str:
    return rng.choice(_NOTHING_TO_ADD[topic])


_ANSWERERS = {
    "photos": _answer_photos,
    "usage": _answer_usage,
    "delivery": _answer_delivery,
    "details": _answer_details,
}


# --------------------------------------------------------------------------------------------
# Building blocks
# --------------------------------------------------------------------------------------------
_NUMBERS = {2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight", 10: "ten", 12: "twelve"}


def _ago(days: int) -> str:
    if days % 7 == 0 and days >= 14:
        return f"about {_NUMBERS.get(days // 7, str(days // 7))} weeks ago"
    if days % 30 == 0 and days >= 60:
        return f"about {_NUMBERS.get(days // 30, str(days // 30))} months ago"
    if days == 7:
        return "a week ago"
    return f"{_NUMBERS.get(days, str(days))} days ago"


def _style_of(tone: str) -> str:
    """Wording register: typos and multi-issue messages are written in the calm register."""
    return tone if tone in ("angry", "vague") else "calm"


def _fmt(template: str, **values: str | None) -> str:
    return template.format(**values)


def _item_ref(rng: random.Random, name: str, oid: str | None) -> str:
    if oid is None:
        return rng.choice(("the {p}", "my {p}", "the {p}", "this {p}")).format(p=name)
    return rng.choice(
        ("the {p} from order {oid}", "my {p} (order {oid})", "the {p} in order #{oid}", "my order {oid} ({p})")
    ).format(p=name, oid=oid)


def _tags_ok(tags: Sequence[str], product: Product, issue: str, item_used: bool | None) -> bool:
    soft = product.category in _SOFT_GOODS
    for tag in tags:
        if (tag == "hard" and soft) or (tag == "soft" and not soft):
            return False
        if tag == "elec" and product.category != "electronics":
            return False
        if tag == "apparel" and product.category != "apparel":
            return False
        if tag == "use" and item_used is False:
            return False
        if tag == "sealed" and issue not in _SEALED_ISSUES:
            return False
    return True


def _filter(templates: Sequence[str], product: Product, issue: str, item_used: bool | None) -> list[str]:
    out = []
    for template in templates:
        text, _, tag_text = template.partition("|")
        if _tags_ok(tag_text.split(), product, issue, item_used):
            out.append(text)
    return out


def _fitting_clauses(issue: IssueType, product: Product, item_used: bool | None) -> list[str]:
    return _filter(_ISSUE_CLAUSES[issue], product, issue, item_used)


def _issue_sentence(rng: random.Random, style: str, claim: Claim, product: Product, item: str) -> str:
    clause = _fmt(rng.choice(_fitting_clauses(claim.issue, product, claim.item_used)), item=item)
    prefix = rng.choice(_ISSUE_PREFIXES[style])
    suffix = rng.choice(_ISSUE_SUFFIXES[style])
    if style == "angry":
        words = clause.split(" ")
        product_words = set(product.name.split())
        candidates = [
            i for i, w in enumerate(words) if len(w) >= 4 and w.isalpha() and w.islower() and w not in product_words
        ]
        if candidates and rng.random() < 0.7:
            i = rng.choice(candidates)
            words[i] = words[i].upper()
        clause = " ".join(words)
    text = prefix + clause
    if style == "vague":
        return text[0].lower() + text[1:] + suffix
    return text[0].upper() + text[1:] + suffix


def _usage_clause(rng: random.Random, claim: Claim, product: Product) -> str | None:
    if claim.item_used is None or (claim.item_used and claim.issue == "item_used"):
        return None  # nothing said, or the issue sentence already says it was used
    bank = _USED_CLAUSES if claim.item_used else _UNUSED_CLAUSES
    return rng.choice(_filter(bank, product, claim.issue, claim.item_used))


def _sentence(clause: str, style: str) -> str:
    if style == "vague":
        return clause[0].lower() + clause[1:]
    end = "!" if style == "angry" and not clause.endswith(("!", "?", ".")) else ""
    text = clause[0].upper() + clause[1:]
    return text + (end or ("" if text.endswith(("!", "?", ".")) else "."))


def _subject(rng: random.Random, style: str, claim: Claim, oid: str | None) -> str:
    options = list(_SUBJECTS_BY_ISSUE[claim.issue]) + list(_SUBJECTS_GENERIC)
    if oid:
        options += [f"Order {oid}", f"Re: order {oid}"]
    subject = rng.choice(options)
    if style == "angry":
        subject = rng.choice((subject.upper() + "!!", "URGENT: " + subject, subject + "!!!"))
    elif style == "vague":
        subject = rng.choice((subject.lower(), "question", "hi", "my order"))
    return _restore(subject, oid)


def _restore(text: str, oid: str | None) -> str:
    """Undo any case change applied to the order id: it must reach the agent verbatim."""
    return re.sub(re.escape(oid), lambda _: oid, text, flags=re.IGNORECASE) if oid else text


# --------------------------------------------------------------------------------------------
# Typos
# --------------------------------------------------------------------------------------------
_WORD = re.compile(r"[A-Za-z']+")


def _protected_words(order: Order, customer: Customer | None) -> frozenset[str]:
    words = set(_WORD.findall(order.order_id))
    for line in order.lines:
        words |= set(_WORD.findall(line.product.name))
    if customer is not None:
        words |= set(_WORD.findall(customer.name))
    return frozenset(w.lower() for w in words)


def _add_typos(rng: random.Random, text: str, protected: frozenset[str]) -> str:
    """Noise on ~8% of eligible words: swap two letters, drop one, lowercase, or drop punctuation.

    Whitespace is kept, so the text still has the same number of words. Chunks holding a digit
    (the order id, quantities) or a protected word (order id, product name, signature) are skipped.
    """
    chunks = re.split(r"(\s+)", text)
    out = []
    for chunk in chunks:
        core = _WORD.findall(chunk)
        eligible = (
            chunk.strip()
            and not any(c.isdigit() for c in chunk)
            and core
            and not any(w.lower() in protected for w in core)
            and sum(len(w) for w in core) >= 2
        )
        if eligible and rng.random() < _TYPO_RATE:
            chunk = _one_typo(rng, chunk)
        out.append(chunk)
    return "".join(out)


def _one_typo(rng: random.Random, chunk: str) -> str:
    letters = [i for i, c in enumerate(chunk) if c.isalpha()]
    kind = rng.choice(("swap", "swap", "drop", "lower", "punct"))
    if kind == "lower" and chunk != chunk.lower():
        return chunk.lower()
    if kind == "punct":
        punct = [i for i, c in enumerate(chunk) if c in ".,!?'"]
        if punct:
            i = rng.choice(punct)
            return chunk[:i] + chunk[i + 1 :]
    if kind == "drop" and len(letters) >= 3:
        i = rng.choice(letters[1:])
        return chunk[:i] + chunk[i + 1 :]
    pairs = [i for i in letters if i + 1 < len(chunk) and chunk[i + 1].isalpha() and chunk[i] != chunk[i + 1]]
    if not pairs:
        return chunk.lower() if chunk != chunk.lower() else chunk[:-1] if len(letters) >= 3 else chunk
    i = rng.choice(pairs)
    return chunk[:i] + chunk[i + 1] + chunk[i] + chunk[i + 2 :]
