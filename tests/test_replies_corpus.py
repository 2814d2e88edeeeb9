"""The reply grader (:mod:`service.env.replies`) against the human-labelled reply corpus (#12).

(a) Error rates. A false positive is a reply the grader accepts though the support lead would not
(share of the lead's unacceptable replies); a false negative is one it refuses though the lead would
accept it (share of the acceptable ones). Both must stay at or below 5 % on the dev corpus
(``replies.jsonl``) and on the holdout (``replies_holdout.jsonl``), which the grader was never tuned on:
it was run once, after development, at FP 0.0 and FN 0.027 (dev: FP 0.0, FN 0.0; before: 0.154 / 0.158).

(b) Coverage: the corpus spans every kind of reply the grader must tell apart.

(c) The reading rules behind the rates, one error class at a time: each test below failed on the grader
before these rules (word-boundary assertions ride along with a new rule; they held already).
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import pytest
from corpus_binding import load, rates

from service.env.replies import meaning

BOUND = 0.05


# ------------------------------------------------------------------------------------ (a) rates

@pytest.mark.parametrize("name", ["replies.jsonl", "replies_holdout.jsonl"])
def test_false_positive_and_false_negative_rates_are_at_most_five_percent(name: str) -> None:
    r = rates(load(name))
    assert r["false_positive_rate"] <= BOUND, (name, r["false_positive_rate"], r["false_positives"])
    assert r["false_negative_rate"] <= BOUND, (name, r["false_negative_rate"], r["false_negatives"])


# --------------------------------------------------------------------------------- (b) coverage

# The lead's reasons ("why") name the fault of an unacceptable reply; one that names none of these is
# mediocre (vague, hedging, curt, missing the order id or the reason).
_FAULTS = {
    "contradictory": r"contradict|approves and (declines|refuses)|same breath|at once|confirms and refuses|and then|"
                     r"then (promises|refunds|grants|approves)|done and also|and refunds|but refunds|but offers",
    "rude": r"rude|lectur|blames?\b|scold|condescend|sarcas|dismissive|hostile|accus|dig at|passive-aggressive",
    "leaking": r"leak|disclos|reveal|names the fraud|implies the customer's account|mentions the .*(history|chargeback)",
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
    assert "used" not in meaning("What they show is the wear that builds up with regular use over time, "
                                 "so we can't replace it.").reasons
    # an arrival still to come, or a finding that is not the parcel, is not the parcel-found reason
    assert "parcel_found" not in meaning("It should reach you within a few days, so we can't replace it yet.").reasons
    assert "parcel_found" not in meaning("We found only one charge on your card, so there's nothing to refund.").reasons
    # a warranty's scope is not its end
    assert "warranty" not in meaning("This is wear and tear, which our warranty doesn't cover, so we can't replace it.").reasons


def test_durations_are_limits_only_in_their_own_context() -> None:
    assert meaning("We're sending a replacement, and it should ship within two days.").window_days == frozenset()
    m = meaning("It was delivered 223 days ago, and the warranty covers 180 days, so we can't replace it.")
    assert m.warranty_days == {180} and m.window_days == frozenset()
    assert meaning("The product's warranty lasted 180 days from delivery and has since expired.").window_days == frozenset()
    assert meaning("Our products carry a 24-month warranty.").warranty_days == {730}


def test_warm_words_are_courteous() -> None:
    assert meaning("I'm so glad the parcel turned up!").courteous
    assert meaning("Enjoy your Merino Crew Sweater!").courteous


def test_negated_refusals_and_undecided_replies_refuse_nothing() -> None:
    m = meaning("No need to send anything back - the refund has already been processed.")
    assert not m.refuses and m.grants == {"refund"}
    m = meaning("We would never refuse a genuine damage claim - a replacement is already on its way.")
    assert not m.refuses and m.grants == {"replacement"}
    for undecided in ("We haven't approved or refused anything yet - the team is reviewing it.",
                      "Nothing has been approved or turned down yet."):
        m = meaning(undecided)
        assert not m.refuses and not m.grants, undecided
    assert meaning("I'm sorry your order didn't work out; we've refunded you in full.").refuses is False
    assert meaning("We can't accept this return.").refuses  # a plain refusal still is one


def test_contradictions_are_both_a_grant_and_a_refusal() -> None:
    m = meaning("Since it has been worn we can't accept this return. That said, if you post it back to us "
                "we'll still refund you in full.")
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
    for blame in ("You should have tried it on indoors before wearing it outside.",
                  "The fault is most likely down to how the item was handled at your end.",
                  "It looks like it hasn't been looked after very well.",
                  "Next time please check with your neighbours before opening a claim.",
                  "There's no duplicate charge - you've misread your bank statement.",
                  "Please be more careful when choosing your size next time.",
                  "It's taken longer because you left the order number out of your first message."):
        assert meaning(blame).rude, blame
    for kind in ("This is not your fault at all.", "Whatever they find, we'll keep you updated.",
                 "I understand how you feel.", "You should have received a label by email.",
                 "Please check at your end whether the charge is still pending.",
                 "Next time we'll check the stock before dispatching."):
        assert meaning(kind).rude == (), kind


def test_leaks_of_return_behaviour_and_account_flags() -> None:
    for leak in ("Even though your account has a high return rate, we've approved a replacement.",
                 "Your account has been flagged, so it has been passed to a specialist team.",
                 "Because you've returned a lot of items recently, this needs another look."):
        assert meaning(leak).leaks, leak
    for discreet in ("Thanks for flagging this with us.", "I've asked Billing to go through the transaction history.",
                     "Keeping an eye on your statement helps protect you from card fraud."):
        assert meaning(discreet).leaks == (), discreet
