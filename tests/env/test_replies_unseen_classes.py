"""The reply grader on the classes a blind holdout found (#12, round 2), each tested with new replies.

A blind set written by someone who never saw the grader (189 replies, FP 10.5 %, FN 10.7 %) missed
these classes. None of the replies below is from that set: each class is tested in other words, so
a rule that learnt the blind strings and not the class fails here.
"""

from __future__ import annotations

import pytest

from service.env.replies import judge, meaning
from tests.env.corpus_binding import bind, fill, resolution_ok, routing_ok


def _judged(case: str, reply: str, decision: str | None, nth: int = 0):
    ticket, verdict, revealed = bind(case, nth)
    return judge(fill(reply, ticket, verdict), ticket, decision, verdict, revealed)


# ---------------------------------------------------------------- holding replies name the right team


@pytest.mark.parametrize(
    ("case", "reply"),
    [
        (
            "route/Returns",
            "Hi {name}, I've forwarded order {order_id} to our payments team, and they'll be in touch shortly. Thanks!",
        ),
        (
            "route/Returns",
            "Hello {name}, order {order_id} is now with the Escalations department; they'll reply soon. Kind regards.",
        ),
        (
            "route/Billing",
            "Hi {name}, thanks for writing. Our returns colleagues have order {order_id} and will get back to you.",
        ),
        (
            "route/Escalations",
            "Hi {name}, I've handed order {order_id} over to Billing, who will contact you soon. Thank you.",
        ),
        (
            "route/Escalations",
            "Hi {name}, the returns department is reviewing order {order_id} and will email you. Thanks!",
        ),
        (
            "route/Fraud",
            "Hi {name}, thanks for your patience. "
            "Order {order_id} is with our Returns specialists, who'll be in touch.",
        ),
    ],
)
def test_a_holding_reply_that_names_another_team_is_wrong(case: str, reply: str) -> None:
    j = _judged(case, reply, None)
    assert not routing_ok(j) and any("team" in p for p in j.problems), (case, reply, j.problems)


@pytest.mark.parametrize(
    ("case", "reply"),
    [
        (
            "route/Returns",
            "Hi {name}, I've forwarded order {order_id} to our returns team, and they'll be in touch shortly. Thanks!",
        ),
        (
            "route/Billing",
            "Hello {name}, our payments team is checking the charges on order {order_id} "
            "and will write back soon. Thanks.",
        ),
        (
            "route/Escalations",
            "Hi {name}, refunds of this size go to Escalations, so order {order_id} is with them now. Thank you!",
        ),
        (
            "route/Fraud",
            "Hi {name}, I've passed order {order_id} to a colleague who handles cases like this; "
            "they'll be in touch. Thanks.",
        ),
    ],
)
def test_a_holding_reply_that_names_its_own_team_or_none_is_fine(case: str, reply: str) -> None:
    j = _judged(case, reply, None)
    assert routing_ok(j), (case, reply, j.problems)


def test_a_holding_reply_that_arranges_the_return_promises_the_outcome() -> None:
    for reply in (
        "Hi {name}, order {order_id} is with our Returns team, who'll email you a prepaid returns label today. Thanks!",
        "Hello {name}, thanks - our Returns team has order {order_id} "
        "and will book a courier to collect it. Kind regards.",
    ):
        j = _judged("route/Returns", reply, None)
        assert not routing_ok(j), (reply, j.problems)
    assert not meaning("Once the team has approved it, they'll email a returns label.").grants


def test_naming_our_fraud_function_leaks_but_a_banks_fraud_team_does_not() -> None:
    assert meaning("Our fraud prevention colleagues are looking at order 1234567.").leaks
    for advice in (
        "If a charge ever looks unfamiliar, your bank's fraud department is the right place to ask.",
        "Your card issuer's fraud line can block the card straight away if you're worried.",
        "For anything that looks like card fraud, please contact your bank's fraud team.",
    ):
        assert meaning(advice).leaks == (), advice


# ----------------------------------------------------- the customer's record, by ordinal or without a count


def test_the_customers_record_leaks_with_an_ordinal_or_without_a_count() -> None:
    for leak in (
        "This is the fourth refund request we've had from you since March.",
        "As it's your second complaint this month, I've looked at it closely.",
        "Given the earlier damage claims on your account, we can't verify this one.",
        "With the returns already on your record, this one needs a closer look.",
        "As it's the first time you've asked us for a refund, I've approved it.",
    ):
        assert meaning(leak).leaks, leak
    for discreet in (
        "I've emailed you a second return label in case the first one didn't print.",
        "This is the second time we've let you down with a late parcel, and I'm sorry.",
        "Your first order with us deserved better, and I'm sorry it arrived damaged.",
        "Refunds of this size are reviewed by our Escalations team.",
        "The claim for order ORD-12345678 has been approved.",
    ):
        assert meaning(discreet).leaks == (), discreet


# --------------------------------------------------------------- grants in colloquial and hedged words


@pytest.mark.parametrize(
    "reply",
    [
        "I'll push a refund through for you today.",
        "I'm going to run the refund through for order ORD-12345678 now.",
        "We've actioned a full refund for you.",
        "I'll raise a refund for the full amount this afternoon.",
        "I'll still bung a refund through as a gesture of goodwill.",
    ],
)
def test_a_refund_in_colloquial_words_is_granted(reply: str) -> None:
    assert meaning(reply).grants == {"refund"}, reply


def test_a_colloquial_grant_on_a_decline_is_a_promise_against_the_decision() -> None:
    j = _judged(
        "reject/used",
        "Hi {name}, since the {product} has been used we can't take it back, but I'll push a refund "
        "through for order {order_id} anyway. Sorry!",
        "reject",
    )
    assert not resolution_ok(j) and not j.clean, j.problems


@pytest.mark.parametrize(
    "reply",
    [
        "We ought to be able to refund this, though I still need to confirm a few details.",
        "In theory we can refund you, but I need to run it past the team first.",
        "We should be able to send a replacement, but I'll have to check a couple of things before I confirm.",
        "I'm fairly confident we can refund you once I've double-checked the order.",
    ],
)
def test_a_hedged_grant_does_not_grant(reply: str) -> None:
    assert not meaning(reply).grants, reply


def test_an_expected_arrival_of_a_granted_refund_still_grants() -> None:
    assert meaning("Your refund has been issued and should reach your card within five days.").grants == {"refund"}
    assert meaning("You should see the refund on your statement in a few days.").grants == {"refund"}


# ------------------------------------------------------------------------ insinuation and speculation


@pytest.mark.parametrize(
    "reply",
    [
        "I'm sure you'll appreciate that we need to be cautious with claims like this one.",
        "We have to be wary of requests of this kind, as I'm sure you understand.",
        "I think you know why we can't approve this.",
        "The scratches suggest the case has been knocked about quite a bit and stored without its cover.",
        "From the photos it seems the mat has been left out in the sun for long periods.",
        "It looks as if the skillet was dropped onto a hard floor at some stage.",
    ],
)
def test_insinuation_and_speculation_about_the_customers_care_are_rude(reply: str) -> None:
    assert meaning(reply).rude, reply


@pytest.mark.parametrize(
    "reply",
    [
        "It looks like the parcel was dropped in transit - I'm so sorry.",
        "The box seems to have been crushed by the courier on the way to you.",
        "Marks like these come from everyday use, so they aren't a defect.",
        "We need to be careful to send the right size this time, so I've double-checked it.",
    ],
)
def test_speculation_about_the_courier_or_the_item_is_not_rude(reply: str) -> None:
    assert meaning(reply).rude == (), reply


# -------------------------------------------------------------------------------- reasons, read right


@pytest.mark.parametrize(
    "reply",
    [
        "Hi {name}, even though you're still within the 30 days for order {order_id}, "
        "the {product} has been worn, so we can't take it back. Sorry!",
        "Hi {name}, you're comfortably inside our 30-day return window for order {order_id}, "
        "but as the {product} has been used we can't accept it. I'm sorry.",
        "Hi {name}, your 30-day window for order {order_id} hasn't closed yet; "
        "the trouble is that the {product} has been used, so we can't refund it. Apologies.",
    ],
)
def test_a_window_mentioned_as_still_open_is_not_the_reason(reply: str) -> None:
    j = _judged("reject/used", reply, "reject")
    assert resolution_ok(j), j.problems


@pytest.mark.parametrize(
    ("case", "reply"),
    [
        (
            "reject/used",
            "Hi {name}, as the {product} on order {order_id} has seen some use, it isn't in a like-new state any "
            "more, so I can't accept the return. Sorry about that.",
        ),
        (
            "reject/used",
            "Hi {name}, thanks for your honesty. The {product} from order {order_id} has been in regular use, so "
            "it can't come back as a change-of-mind return. Apologies.",
        ),
        (
            "reject/in_transit",
            "Hi {name}, order {order_id} is with the delivery company and due tomorrow, so there's nothing "
            "to replace yet. Thanks for your patience!",
        ),
        (
            "reject/in_transit",
            "Hi {name}, the parcel for order {order_id} is still making its way to you and is on schedule, "
            "so we can't refund it yet. Sorry for the wait.",
        ),
        (
            "reject/parcel_found",
            "Hi {name}, good to hear the parcel for order {order_id} didn't go missing after all. As it's "
            "safely in your hands, no replacement is needed. Thanks!",
        ),
        (
            "reject/parcel_found",
            "Hi {name}, glad order {order_id} made it to you in the end - so there's nothing to refund. "
            "Thanks for letting us know!",
        ),
    ],
)
def test_reasons_in_other_words(case: str, reply: str) -> None:
    j = _judged(case, reply, "reject")
    assert resolution_ok(j), (case, j.problems)


def test_a_rule_mentioned_as_not_applying_is_neither_a_reason_nor_a_refusal() -> None:
    m = meaning(
        "Final-sale items usually can't be returned, but that doesn't apply to damage, so a replacement is on its way."
    )
    assert "final_sale" not in m.reasons | m.facts and not m.refuses and m.grants == {"replacement"}
    m = meaning(
        "Hygiene products are normally excluded, but the rule doesn't apply when we've shipped the wrong item, so "
        "I've arranged for the correct one to be sent to you."
    )
    assert "final_sale" not in m.reasons | m.facts and not m.refuses and m.grants == {"replacement"}
    m = meaning("I've arranged for the correct size to be shipped to you.")
    assert m.grants == {"replacement"}
    assert meaning(
        "Final-sale items can't be returned, so I can't accept this one."
    ).refuses  # a plain rule still refuses


# -------------------------------------------------------------------------------------------- courtesy


@pytest.mark.parametrize(
    "reply",
    [
        "Hello Sam, your refund of $40.00 for order ORD-12345678 has gone through. "
        "Any questions, just reply to this email.",
        "Hi Priya, I've passed order ORD-12345678 to our Returns team. They'll update you directly.",
        "Dear Mr Lee, the replacement for order ORD-12345678 ships today. "
        "Let me know if there's anything else I can do.",
    ],
)
def test_a_greeting_and_a_helpful_close_are_courteous(reply: str) -> None:
    assert meaning(reply).courteous, reply


@pytest.mark.parametrize(
    "reply",
    [
        "Refund done for ORD-12345678.",
        "Order ORD-12345678: passed to Returns.",
        "Hi. Rejected, used item, ORD-12345678.",
        "Hi Sam, stop emailing us about ORD-12345678. Let me know if there's anything else.",
    ],
)
def test_curt_or_rude_replies_are_still_not_courteous(reply: str) -> None:
    m = meaning(reply)
    assert not m.courteous or m.rude, reply


# ------------------------------------------- probe batch 1 (31 new replies: FP 5/16, FN 2/15 before these)


def test_hedged_refusals_and_reasons_decide_nothing() -> None:
    m = meaning("The guarantee might have run out, so we may not be able to do anything here.")
    assert not m.refuses and "warranty" not in m.reasons
    assert meaning("The warranty ran out last month, so we can't replace it.").refuses


@pytest.mark.parametrize(
    ("case", "reply"),
    [
        (
            "reject/used",
            "Hi {name}, as the {product} from order {order_id} have been out on several hikes, they're no longer "
            "classed as unused, so we can't accept them back. Sorry!",
        ),
        (
            "reject/in_transit",
            "Hi {name}, order {order_id} is on the move and expected within the usual delivery time, so it's "
            "too soon for a replacement. Thanks for bearing with us.",
        ),
    ],
)
def test_more_reasons_in_other_words(case: str, reply: str) -> None:
    j = _judged(case, reply, "reject")
    assert resolution_ok(j), (case, j.problems)


def test_guessing_how_the_customer_stored_it_and_habitual_outcomes() -> None:
    assert meaning("It's ordinary wear, likely from the bag being crammed into an overhead locker each week.").rude
    assert meaning("It's ordinary wear, so we can't replace it.").rude == ()
    for guess in (
        "I've passed it on - they almost always approve these.",
        "It's with Returns; as a rule they say yes.",
    ):
        assert meaning(guess).prejudges, guess
    for plain in (
        "Refunds of this size usually need sign-off, so it's with Escalations.",
        "If they approve it, refunds usually reach your card within five days.",
    ):
        assert not meaning(plain).prejudges, plain


def test_screening_and_reports_on_the_account_leak() -> None:
    for leak in (
        "Your order was picked up by our automated screening, so a colleague will review it.",
        "Because of the damage reports on your account, this needs a second look.",
    ):
        assert meaning(leak).leaks, leak
    assert meaning("Damage reports like yours help us improve our packaging.").leaks == ()


# ------------------------------------------- probe batch 2 (31 new replies: FP 2/16, FN 0/15 before these)


def test_a_decision_already_taken_is_no_hedge() -> None:
    assert meaning("We have decided to refund you in full for order ORD-12345678.").grants == {"refund"}
    assert meaning("I decided to bend the rules and your replacement ships today.").grants == {"replacement"}
    assert not meaning("The team will decide whether a refund is due.").grants


def test_patterns_noticed_on_the_account_leak() -> None:
    for leak in (
        "We've spotted some unusual activity on your account, so a colleague will review this.",
        "There's an odd pattern in your recent orders, so this needs another look.",
    ):
        assert meaning(leak).leaks, leak
    assert meaning("I can see just the one charge on your account for this order.").leaks == ()


# ---------------------------------------------- blind batch 5, round 4 (130 replies: FP 3/63, FN 12/67 before)


def test_a_warranty_length_named_in_its_sentence_is_no_return_window() -> None:
    # the warranty word is further off than the near context, and "date of delivery" is shared by both
    for text in (
        "Sadly the warranty that came with your Ergonomic Adjustable Office Chair, 365 days from the date of "
        "delivery, ran out last month.",
        "Your protection period was 90 days counted from receipt, and the guarantee has since ended.",
    ):
        m = meaning(text)
        assert m.window_days == frozenset() and m.warranty_days == {365 if "365" in text else 90}, text
    assert meaning("I'm sorry, but the period is 30 days from the date of delivery.").window_days == {30}


def test_days_back_is_an_elapsed_time() -> None:
    assert meaning("The parcel reached you 64 days back, and our returns close after 30 days.").window_days == {30}


def test_someone_will_be_in_touch_names_no_one() -> None:
    assert not meaning("Thanks for your patience, somebody will get back to you shortly.").holds
    assert meaning("Thanks, someone from our Billing team will get back to you shortly.").holds
    j = _judged(
        "route/Billing", "Hello {name}, thanks for writing about order {order_id}. Somebody will follow up.", None
    )
    assert not routing_ok(j), j.problems


def test_red_flags_on_the_account_leak() -> None:
    for leak in (
        "Good news: nothing on your profile raised a red flag, so I've approved the refund.",
        "We saw no warning signs with your orders, so the replacement is on its way.",
    ):
        assert meaning(leak).leaks, leak


def test_a_greeting_and_what_happens_next_is_courteous() -> None:
    for text in (
        "Hello Ana, your refund for order ORD-12345678 is done and should reach your card within a few days.",
        "Hi Ben, a new kettle is going out for order ORD-12345678 and will be with you shortly.",
        "Hi Cy, order ORD-12345678 is with Billing now. They will answer you by email.",
    ):
        assert meaning(text).courteous, text
    # without a greeting, or with only a verdict, it is still curt
    assert not meaning("Refund done for ORD-12345678, should reach your card soon.").courteous
    assert not meaning("Hi Dee, order ORD-12345678: too late, nothing we can do.").courteous


def test_a_part_of_the_refund_is_an_untrue_amount() -> None:
    for text in (
        "Hi {name}, thanks for waiting: for order {order_id} we've refunded 50% of the price of the {product}.",
        "Hello {name}, sorry about order {order_id}. A portion of the cost has been refunded to you.",
    ):
        j = _judged("approve_refund", text, "approve_refund")
        assert not resolution_ok(j) and any("part of the refund" in p for p in j.problems), (text, j.problems)
    assert not meaning("Thanks! That's a full refund, not a partial refund, for order ORD-12345678.").partial


def test_more_then_and_a_bracketed_restatement_are_elapsed_times() -> None:
    m = meaning("Sorry, it is more then 40 days since delivery (45 days), and the window is 30 days.")
    assert m.window_days == {30} and m.elapsed == ((40, "at_least"),), m
    assert meaning("The parcel arrived 61 days ago (61 days in all); returns need 30 days.").window_days == {30}


def test_i_get_it_is_understanding_not_an_arrival() -> None:
    assert "parcel_found" not in meaning("We really get it, but perishables cannot be returned, sorry.").reasons
    assert "parcel_found" in meaning("Glad you got it in the end, so there's no refund due.").reasons


def test_a_look_already_taken_does_not_hedge_the_grant() -> None:
    assert meaning("I have looked over your order and I have refunded it in full.").grants == {"refund"}
    assert meaning("Hi, I've had a proper look at ORD-12345678 and I've refunded the lamp.").grants == {"refund"}
    assert not meaning("We will look at a refund for you.").grants
    assert not meaning("Our team will take a look at the refund.").grants


def test_the_window_stated_as_the_rules_trigger_is_its_reason() -> None:
    text = "Our window closes when 30 days have passed. I'm so sorry, this return can't go ahead."
    assert "window" in meaning(text).reasons
    assert "window" not in meaning("Once it's back with us within 30 days, we'll refund it.").reasons
