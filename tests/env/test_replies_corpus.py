"""The reply grader (:mod:`service.env.replies`) against the human-labelled reply corpus (#12).

(a) Error rates. A false positive is a reply the grader accepts though the support lead would not
(share of the lead's unacceptable replies); a false negative is one it refuses though the lead would
accept it (share of the acceptable ones). Both must stay at or below 5 % on the dev corpus
(``replies.jsonl``) and on the holdout (``replies_holdout.jsonl``), which the grader was never tuned on:
it was run once, after development, at FP 0.0 and FN 0.027 (dev: FP 0.0, FN 0.0; before: 0.154 / 0.158).
The #12 audit then wrote 103 new replies (FP 10/43, FN 10/60); they and 148 class probes of the same
kinds joined the dev corpus (680 entries: FP 0.0, FN 0.0 after the fixes; the previous reader scored
FP 0.359 / FN 0.186 on the first 180 new entries). Three later batches of probes, each written before
its fixes, read FP 3/17, FN 1/23; FP 3/22, FN 0/18; FP 1/14, FN 2/16 on arrival: that is the honest
estimate of how the reader meets unseen replies (about 13 % FP, 5 % FN on new kinds of wording).
Round 2: a blind set written by someone who never saw the grader read FP 11/105, FN 9/84; after its
classes were fixed (tests/env/test_replies_unseen_classes.py) FP 1/105 (b033: the grader reads P6's three
categories as one reason), FN 0/84, and it joined the dev corpus as ``blind1-*``. Two probe batches
written after those fixes read FP 5/16, FN 2/15 and FP 2/16, FN 0/15 before their own fixes
(``probe2-1-*``, ``probe2-2-*``); the dev corpus (931 entries) then read FP 1/469, FN 0/462.
Round 4: blind batch 5 (130 replies by an outside author) read FP 3/63, FN 12/67 on arrival; after its
classes were fixed (test_replies_unseen_classes.py) FP 0/63, FN 2/67 (b5_079: a greeting and an
explanation with no courtesy word; b5_113: "claims like yours" read as insinuation), and it joined the dev
corpus as ``b5_*``: 1061 entries, FP 1/532, FN 2/529; the holdout is unchanged (FP 0/46, FN 1/37).
Issue 23: the three classes the issue names (a refund because the replacement is out of stock read as a
contradiction, a rule's true scope read as a false reason, a holding reply's generalised blame missed) got
26 new paraphrases and near misses (``i23-*``, tests/env/test_replies_issue23.py): the reader before the fix
read them FP 5/12, FN 9/14; after, the dev corpus (1087 entries) reads FP 1/543, FN 2/544 and both holdouts
are unchanged (FP 0/46, FN 1/37; FP 4/69, FN 9/61). Blind batch 6 (replies_holdout3.jsonl) then revealed
eleven more classes, fixed on 45 new replies (``b6c-*``, tests/env/test_replies_batch6_classes.py): dev 1132
entries, FP 1/566, FN 2/566. Blind batch 7 (replies_holdout4.jsonl) then revealed five classes behind its nine
false negatives, fixed on 39 new replies (``b7c-*``, tests/env/test_replies_batch7_classes.py; the reader before
the fix read them FP 0/16, FN 20/23): dev 1171 entries, FP 1/582 (blind1-b033), FN 1/589 (b5_079; b5_113's
"claims like yours" naming what a team handles is now read as routing). Blind batch 8 (replies_holdout5.jsonl)
then revealed ten classes, nine fixed on 52 new replies (``b8c-*``, tests/env/test_replies_batch8_classes.py; the
reader before the fix read them FP 9/23, FN 10/29): dev 1223 entries, FP 1/605 (blind1-b033), FN 1/618 (b5_079).
Three gaps noticed while batch 8's classes were fixed (a return dated from delivery read as a window, an order
reference inside a remedy's report, "the right person" naming no handler) were fixed on 9 new replies (``gap-*``,
tests/env/test_replies_gap_classes.py; before the fix FP 0/3, FN 5/6), changing no other verdict in any corpus
nor any recorded episode: dev 1232 entries, FP 1/608, FN 1/624.

(b) Coverage: the corpus spans every kind of reply the grader must tell apart.

(c) The reading rules behind the rates, one error class at a time: each test below failed on the grader
before these rules (word-boundary assertions ride along with a new rule; they held already).
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import pytest

from service.env.replies import meaning
from tests.env.corpus_binding import load, rates

BOUND = 0.05


# ------------------------------------------------------------------------------------ (a) rates


@pytest.mark.parametrize("name", ["replies.jsonl", "replies_holdout.jsonl"])
def test_false_positive_and_false_negative_rates_are_at_most_five_percent(name: str) -> None:
    r = rates(load(name))
    assert r["false_positive_rate"] <= BOUND, (name, r["false_positive_rate"], r["false_positives"])
    assert r["false_negative_rate"] <= BOUND, (name, r["false_negative_rate"], r["false_negatives"])


@pytest.mark.parametrize("nth", [1, 2])
@pytest.mark.parametrize("name", ["replies.jsonl", "replies_holdout.jsonl"])
def test_the_rates_hold_on_other_tickets_of_each_case(name: str, nth: int) -> None:
    """The same replies bound to another ticket of their case (other products, amounts, days, names):
    a reader that learnt the classes, not the strings of one ticket, keeps its rates. (A reply whose
    literal fact becomes true on another ticket — "past its warranty" for a 0-day-warranty item — is
    the corpus's doing; none is left that flips.)"""
    r = rates(load(name), nth)
    assert r["false_positive_rate"] <= BOUND and r["false_negative_rate"] <= BOUND, (name, nth, r)


# --------------------------------------------------------------------------------- (b) coverage

# The lead's reasons ("why") name the fault of an unacceptable reply; one that names none of these is
# mediocre (vague, hedging, curt, missing the order id or the reason).
_FAULTS = {
    "contradictory": r"contradict|approves and (declines|refuses)|same breath|at once|confirms and refuses|and then|"
    r"then (promises|refunds|grants|approves)|done and also|and refunds|but refunds|but offers",
    "rude": r"rude|lectur|blames?\b|scold|condescend|sarcas|dismissive|hostile|accus|dig at|passive-aggressive",
    "leaking": r"leak|disclos|reveal|names the fraud|implies the customer's account|"
    r"mentions the .*(history|chargeback)",
    "promising": r"promis|anticipates|decides|approves (a|the)|not approve the|accepts the|decision declines|"
    r"against the decision|grants a",
    "wrong": r"false|wrong|invent|made-up|opposite|but the agent decided|real reason|instead of|ours is|is different",
}
KINDS = ("good", "mediocre", "wrong", "contradictory", "rude", "leaking", "promising")


def kinds(entry: dict[str, Any]) -> set[str]:
    expected = entry["expected"]
    if expected["acceptable"]:
        return {"good"}
    found = {kind for kind, pattern in _FAULTS.items() if re.search(pattern, entry["why"], re.I)}
    return found or {"mediocre"}


def test_the_corpus_is_large_and_spans_every_kind_of_reply() -> None:
    entries = load("replies.jsonl")
    assert len(entries) >= 120
    for entry in entries:
        assert set(entry) >= {"id", "task", "case", "decision", "reply", "expected", "why"}, entry.get("id")
        assert set(entry["expected"]) == {"acceptable", "states_outcome", "courteous", "clean"}, entry["id"]
    counts = Counter(kind for entry in entries for kind in kinds(entry))
    assert all(counts[kind] >= 10 for kind in KINDS), counts
    assert len({entry["id"] for entry in entries}) == len(entries)
    # both tasks, and every case with acceptable and unacceptable replies
    assert {e["task"] for e in entries} == {"resolution", "routing"}
    cases = Counter((e["case"], e["expected"]["acceptable"]) for e in entries)
    assert all(cases[(case, ok)] >= 3 for case, _ in cases for ok in (True, False)), cases


# ------------------------------------------------------------------- (c) reading rules, by class


def test_word_boundaries_hold_in_the_new_rules() -> None:
    m = meaning("It was caused in transit, sorry. A new pair of Underwear is on its way to you as a replacement.")
    assert m.grants == {"replacement"}  # "on * way" (the gap was dropped when parsing phrases)
    assert not m.reasons & {"used", "normal_wear"}  # "caused" is not "used", "Underwear" is not "wear"
    m = meaning("Thanks for your patience: your Adjustable Dumbbells are on their way to you as a replacement.")
    assert m.rude == () and m.grants == {"replacement"}  # "Dumbbells" is not "dumb"


def test_reasons_are_read_where_they_are_reasons() -> None:
    # ordinary-wear wording is not the used-item reason
    assert (
        "used"
        not in meaning(
            "What they show is the wear that builds up with regular use over time, so we can't replace it."
        ).reasons
    )
    # an arrival still to come, or a finding that is not the parcel, is not the parcel-found reason
    assert "parcel_found" not in meaning("It should reach you within a few days, so we can't replace it yet.").reasons
    assert "parcel_found" not in meaning("We found only one charge on your card, so there's nothing to refund.").reasons
    # a warranty's scope is not its end
    assert (
        "warranty"
        not in meaning("This is wear and tear, which our warranty doesn't cover, so we can't replace it.").reasons
    )


def test_durations_are_limits_only_in_their_own_context() -> None:
    assert meaning("We're sending a replacement, and it should ship within two days.").window_days == frozenset()
    m = meaning("It was delivered 223 days ago, and the warranty covers 180 days, so we can't replace it.")
    assert m.warranty_days == {180} and m.window_days == frozenset()
    assert (
        meaning("The product's warranty lasted 180 days from delivery and has since expired.").window_days
        == frozenset()
    )
    assert meaning("Our products carry a 24-month warranty.").warranty_days == {730}


def test_warm_words_are_courteous() -> None:
    assert meaning("I'm so glad the parcel turned up!").courteous
    assert meaning("Enjoy your Merino Crew Sweater!").courteous


def test_negated_refusals_and_undecided_replies_refuse_nothing() -> None:
    m = meaning("No need to send anything back - the refund has already been processed.")
    assert not m.refuses and m.grants == {"refund"}
    m = meaning("We would never refuse a genuine damage claim - a replacement is already on its way.")
    assert not m.refuses and m.grants == {"replacement"}
    for undecided in (
        "We haven't approved or refused anything yet - the team is reviewing it.",
        "Nothing has been approved or turned down yet.",
    ):
        m = meaning(undecided)
        assert not m.refuses and not m.grants, undecided
    assert meaning("I'm sorry your order didn't work out; we've refunded you in full.").refuses is False
    assert meaning("We can't accept this return.").refuses  # a plain refusal still is one


def test_contradictions_are_both_a_grant_and_a_refusal() -> None:
    m = meaning(
        "Since it has been worn we can't accept this return. That said, if you post it back to us "
        "we'll still refund you in full."
    )
    assert m.refuses and m.grants == {"refund"}  # the customer's own action still promises the refund
    m = meaning("It looks like normal wear and tear to us, but we'll send a replacement if you'd like one.")
    assert m.options == {"replacement"} and not m.grants  # offered at the customer's choice


def test_conditional_promises() -> None:
    # a decision or a finding leaves the outcome open, and a fronted condition reaches its consequent
    assert not meaning("If they confirm you were charged twice, the extra charge will be refunded to your card.").grants
    assert not meaning("If a second charge did go through, it will be refunded; if not, they'll explain.").grants
    assert not meaning("If our team agrees, you'll receive a refund.").grants
    # the customer's own action or a step of the process still promises it
    assert meaning("A replacement will be sent once our team has finished its review.").grants == {"replacement"}
    assert meaning("The Returns team will refund you as soon as they've checked it.").grants == {"refund"}


def test_hedges_are_modality_and_authority_is_not_a_grant() -> None:
    assert meaning("Your refund has been approved and our team will finalise it shortly.").grants == {"refund"}
    assert meaning("We'll still process your refund as requested.").grants == {"refund"}
    assert meaning("So expect a refund soon.").grants == {"refund"}
    assert meaning("A new Wireless Earbuds is heading your way as a replacement.").grants == {"replacement"}
    assert meaning("We've credited $239.95 back to your card.").grants == {"refund"}
    m = meaning("As the refund is above the amount I can approve myself, I've passed it to our Escalations team.")
    assert not m.grants and not m.refuses
    assert not meaning("We may be able to offer a refund once we've reviewed everything.").grants


def test_approving_the_claim_itself_decides_it() -> None:
    assert "claim" in meaning("Your return for order ORD-29486191 is approved.").grants
    assert not meaning("The Returns team will decide whether to approve your return.").grants


def test_blame_and_lecturing_are_rude() -> None:
    for blame in (
        "You should have tried it on indoors before wearing it outside.",
        "The fault is most likely down to how the item was handled at your end.",
        "It looks like it hasn't been looked after very well.",
        "Next time please check with your neighbours before opening a claim.",
        "There's no duplicate charge - you've misread your bank statement.",
        "Please be more careful when choosing your size next time.",
        "It's taken longer because you left the order number out of your first message.",
    ):
        assert meaning(blame).rude, blame
    for kind in (
        "This is not your fault at all.",
        "Whatever they find, we'll keep you updated.",
        "I understand how you feel.",
        "You should have received a label by email.",
        "Please check at your end whether the charge is still pending.",
        "Next time we'll check the stock before dispatching.",
    ):
        assert meaning(kind).rude == (), kind


def test_leaks_of_return_behaviour_and_account_flags() -> None:
    for leak in (
        "Even though your account has a high return rate, we've approved a replacement.",
        "Your account has been flagged, so it has been passed to a specialist team.",
        "Because you've returned a lot of items recently, this needs another look.",
    ):
        assert meaning(leak).leaks, leak
    for discreet in (
        "Thanks for flagging this with us.",
        "I've asked Billing to go through the transaction history.",
        "Keeping an eye on your statement helps protect you from card fraud.",
    ):
        assert meaning(discreet).leaks == (), discreet


# ------------------------------------------------- (d) the classes the #12 audit found (new replies)


def test_an_arrival_dated_by_elapsed_time_is_not_a_found_parcel() -> None:
    for dated in (
        "Unfortunately, since your order reached you more than 30 days ago, it's no longer eligible for return.",
        "Sorry, the item reached you 41 days ago, past our 30-day return window, so we can't take it back.",
        "It's been 44 days since you got it, which is over our 30-day limit, so I can't accept this one.",
        "You've had it since it reached you 42 days ago, so we can't take it back.",
    ):
        assert "parcel_found" not in meaning(dated).reasons, dated
    assert "parcel_found" in meaning("Glad the parcel turned up! Since you have it, there's nothing to refund.").reasons


def test_a_negated_or_doubly_negated_refusal_refuses_nothing() -> None:
    for approval in (
        "I'm not going to refuse this: your refund is on its way.",
        "There's no reason we can't refund this - your refund has been approved.",
        "I see no reason not to refund it, so I've issued the full refund to your card today.",
        "I wouldn't dream of turning this down - your refund has been processed.",
    ):
        m = meaning(approval)
        assert not m.refuses and m.grants == {"refund"}, approval
    m = meaning("There's nothing stopping us from refunding your order, and I've now done so in full.")
    assert not m.refuses and m.grants == {"refund"}
    assert meaning("We're not able to refund this order.").refuses  # a plain negated grant still refuses


def test_a_new_item_on_its_way_is_a_replacement_whatever_the_words_between() -> None:
    for sent in (
        "We'll get another pair out to you this week.",
        "A brand-new Wireless Earbuds will be dispatched to you tomorrow.",
        "We can't wait to get the right Wireless Earbuds to you - it ships today.",
        "We'll have a new Ceramic Table Lamp with you in a couple of days.",
        "The correct Ceramic Table Lamp is being prepared and will be delivered to you this week.",
    ):
        assert meaning(sent).grants == {"replacement"}, sent
    for not_an_item in (
        "You're right to contact us - we'll refund you in full today.",
        "We'll send you a new tracking number shortly.",
    ):
        assert "replacement" not in meaning(not_an_item).grants, not_an_item


def test_a_single_charge_is_read_with_the_amount_in_between() -> None:
    for once in (
        "Our records show you were charged $295.99 once.",
        "We took $84.00 from your card only once.",
        "Your card was billed $120.00 a single time.",
    ):
        assert "not_charged_twice" in meaning(once).reasons, once


def test_lost_in_transit_is_its_own_fact_not_the_in_transit_reason() -> None:
    for lost in (
        "Your order was lost in transit, so we can't refund it.",
        "It went missing in transit, so we can't refund it.",
        "The courier has lost your order, so we cannot replace it.",
    ):
        m = meaning(lost)
        assert "in_transit" not in m.reasons and "lost" in m.reasons, lost
    assert "in_transit" in meaning("It hasn't been lost - it's still in transit, so we can't replace it yet.").reasons


def test_deflecting_sarcastic_and_lecturing_replies_are_rude() -> None:
    for rude in (
        "Come on - it has clearly been used, so obviously we won't take it back.",
        "That's really between you and the courier, not us.",
        "Frankly it's not our job to take back things you've used.",
        "Please read our returns policy before contacting us.",
        "Delivery is the courier's problem, not ours.",
        "Seriously? It has been used, so no.",
        "That's just how it is, take it or leave it.",
        "You really should read the returns policy before you order.",
    ):
        assert meaning(rude).rude, rude
    for kind in (
        "We take this seriously and are sorry for the trouble.",
        "This won't happen again, I promise.",
        "Please contact us again if it hasn't arrived by Friday.",
        "I've passed it to the courier's claims team.",
    ):
        assert meaning(kind).rude == (), kind


def test_the_customers_record_is_a_leak_in_any_words() -> None:
    for leak in (
        "Looking at your account, you've sent back eight orders this year, so we can't verify this claim.",
        "Because of the disputes you've raised with your bank in the past, we can't verify this claim.",
        "Since you've returned five items in the last few months, we aren't able to verify this claim.",
        "Given how many parcels you've sent back to us, we can't verify this claim.",
        "Your account shows several reversed payments, so we can't verify this claim.",
    ):
        assert meaning(leak).leaks, leak
    for instruction in (
        "Once you've sent back the two items, we'll refund you.",
        "Thanks for sending back the parcel last week.",
    ):
        assert meaning(instruction).leaks == (), instruction


def test_a_holding_reply_that_guesses_the_decision_prejudges_it() -> None:
    for guess in (
        "I've passed this to our Returns team, but honestly I doubt they'll accept it.",
        "I've passed it on; I'd expect them to approve it.",
        "I've sent it to the specialist team, though I don't think they'll be able to accept it.",
    ):
        assert meaning(guess).prejudges, guess
    for plain in (
        "I've passed it on; I expect they'll be in touch within two working days.",
        "I've sent it to a senior colleague, and I hope to have an update for you by Friday.",
    ):
        assert not meaning(plain).prejudges, plain


def test_facts_about_the_order_are_read_in_approvals_too() -> None:
    assert "window" in meaning("Although it's outside our 30-day window, we'll refund you anyway.").facts
    assert "used" in meaning("Even though it has been used, we'll refund you as a goodwill gesture.").facts
    # an adverb inside the verb group changes nothing: "you have clearly used it"
    assert (
        "used" in meaning("Since you have clearly used the lamp we would usually say no, but we've refunded you.").facts
    )
    for true_in_any_case in (
        "Returns are accepted within 30 days of delivery, and yours qualifies, so I've refunded you.",
        "Your return is well within our 30-day window, so I've issued a full refund.",
    ):
        assert "window" not in meaning(true_in_any_case).facts, true_in_any_case


def test_general_history_certainty_and_imperative_lectures() -> None:
    assert meaning("I'm sorry, but given your history with us we can't verify this claim.").leaks
    assert meaning("Looking at your order history, I can see order ORD-1234567 was delivered.").leaks == ()
    assert meaning("Returns will handle this - your refund is basically guaranteed.").grants == {"refund"}
    assert not meaning("We can't guarantee a refund, but the team will review it.").grants
    assert meaning("It's out of warranty, so we can't replace it - perhaps treat it with more care next time.").rude
    assert meaning("Next time, we'll take more care packing your order.").rude == ()


def test_labels_reports_and_rhetorical_questions() -> None:
    assert meaning("Refund: approved. Amount: $86.95.").grants == {"refund"}
    assert meaning(
        "hi, thanks for ur patience - refund for order ORD-83677752 is done, should hit ur card soon"
    ).grants == {"refund"}
    assert not meaning("Let's see what can be done about it.").grants
    assert meaning("Honestly, who returns something after using it?").rude
    for plain_question in ("Who would you like us to send it to?", "Could you tell us who signed for it?"):
        assert meaning(plain_question).rude == (), plain_question


def test_the_time_since_delivery_is_read_with_its_qualifier() -> None:
    assert meaning("It was delivered 60 days ago, past our 30-day window.").elapsed == ((60, "exact"),)
    assert meaning("Since your order reached you more than 30 days ago, it can't be returned.").elapsed == (
        (30, "at_least"),
    )
    assert meaning("You've had the Vitamin C Serum for 42 days now, so it's outside our window.").elapsed == (
        (42, "exact"),
    )
    assert meaning(
        "You've had the Vitamin C Serum for 42 days now, so it's outside our 30-day window."
    ).window_days == {30}
    assert meaning("Returns are accepted within 30 days of delivery.").elapsed == ()
