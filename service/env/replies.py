"""What a reply to the customer says: read on meaning, deterministically.

:func:`meaning` turns a reply into a :class:`Meaning` — the remedies it grants unconditionally (or
the claim itself, "your return is approved"), those it only offers, whether it refuses, whether it is
a holding reply, the denial reasons it asserts, the time limits, warranty lengths and amounts it
states, the order ids it quotes, the teams it names, courtesy (warm words, or a greeting with a helpful
close), rudeness (insults, blame, lecturing, insinuation) and leaked risk notes.
:func:`judge` compares that meaning with the agent's own decision, the policy's verdict and the
ticket's facts: the reply checks of the rubrics (:mod:`service.env.tasks`) read its answer.

It reads lemmas on whole tokens within clauses (:mod:`service.env.language`): synonyms and
paraphrases are alternatives of a concept, and negation is scoped to what it negates ("we can't refund
used items" asserts use; "it hasn't been used" does not; "no need to send anything back" and "we
would never refuse" refuse nothing; "we haven't approved or refused anything yet" decides nothing).
A condition is judged by what it hangs on: a decision or a finding leaves the outcome open ("if the
team approves it, you'll be refunded" promises nothing, and a fronted "if …," reaches the rest of its
sentence), the customer's choice makes the remedy an option ("if you'd prefer a refund"), while the
customer's own action or a step of the process still promises it ("if you post it back we'll refund
you", "will be sent once our team has finished its review"). Modality ("may", "whether") hedges;
process words ("our team will finalise it") do not; a remedy that is the object of our own act is granted
in any verb ("I'll push a refund through"). A holding reply that names a team other than the ticket's
queue misinforms the customer. Reasons are judged as denial reasons only where
the reply declines: "a replacement is on its way" in an approval is not the in-transit reason.
``tests/env/corpus/replies*.jsonl`` holds human-labelled replies; docs/methodology.md reports this reader's
false-positive and false-negative rates on them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from functools import lru_cache
from itertools import pairwise

from service.env.language import (
    NEGATORS,
    TEMPORAL,
    WORD_NUMBERS,
    Clause,
    Phrases,
    clauses,
    lemmas,
    normalize,
    sentences,
    without_idioms,
    words,
)
from service.env.policy import ESCALATION_THRESHOLD, RETURN_WINDOW_DAYS, Verdict
from service.env.world import Ticket

# ------------------------------------------------------------------------------------ concepts

_REFUND = Phrases(
    "refund|money back|reimburse|reimbursement|your money|full amount|repay|repayment|credit * card|credit * account|"
    "credit * payment|back to * card|back to * account|back to * payment|store credit|payment back|back in * account|"
    "back on * card|back into * account|the money"
)
# A new or the right item on its way, in either order: "we've shipped the right earbuds", "the correct
# one is on its way", "get a new one out to you".
_DISPATCH = ("send", "ship", "dispatch", "post", "arrange for", "go out", "on * way", "head")
_ITEM = ("new", "another", "correct", "right", "fresh", "brand")
_REPLACE = Phrases(
    "replacement|replace|new one|another one|new pair|new unit|new item|fresh one|exchange|swap|right one|correct one|"
    "right item|correct item|right size|correct size|another size|different size|resend|re send|reship|re ship|"
    "send * out again|get a new * out|get a new * to you|"
    + "|".join(f"{verb} * {item}|{item} * {verb}" for verb in _DISPATCH for item in _ITEM)
)
# Sending something to the customer, in any order of words: "get * out to you", "will be dispatched".
_SENT_TO_YOU = Phrases(
    "get * out|get * to you|have * with you|with you|on * way|reach you|go out|come to you|out to you|your way"
)
_SEND_VERBS = frozenset(
    {
        "send",
        "ship",
        "dispatch",
        "post",
        "deliver",
        "courier",
        "mail",
        "pack",
        "prepare",
        "arrange",
        "head",
        "arrive",
        "bring",
        "get",
    }
)
_NOT_A_THING = frozenset(
    {
        "away",
        "now",
        "here",
        "there",
        "that",
        "to",
        "and",
        "or",
        "of",
        "for",
        "with",
        "in",
        "on",
        "at",
        "we",
        "i",
        "you",
        "it",
        "they",
        "this",
        "so",
        "after",
        "before",
        "ahead",
        "back",
        "again",
        "information",
        "way",
        "place",
        "time",
        "thing",
        "about",
        "be",
        "as",
        "if",
        "than",
    }
)
# What is new or right is not always the item: "a new tracking number", "the correct address".
_NOT_THE_ITEM = Phrases(
    "|".join(
        f"{item} {thing}|{item} * {thing}"
        for item in _ITEM
        for thing in (
            "label",
            "link",
            "tracking",
            "code",
            "number",
            "email",
            "address",
            "date",
            "detail",
            "information",
            "password",
            "account",
            "team",
            "department",
            "colleague",
            "person",
            "update",
            "message",
        )
    )
)
_GRANT = Phrases(
    "approve|approved|issue|process|arrange|send|ship|give|grant|credit|initiate|receive|get|see|authorize|authorise|"
    "confirm|dispatch|post|start|put through|on * way|go ahead|happy to|glad to|pleased to|refund you|be refund|"
    "will refund|have refund|back|sort|take care|ask * to refund|ask * to process|ask * to issue|ask * to send|"
    "ask * to arrange|ask * to credit|will replace|will exchange|will swap|will resend|will reship|have replace|"
    "have exchange|have swap|have resend|have reship|be replace|be exchange|be swap|be resend|be reship|head|heading|"
    "expect|follow|arrive|reach you|reach your|be with you|finalise|finalize|complete|release|go through|"
    "as good as|definitely|certainly|appear on|appear in|show on|show up on|land in|"
    "deliver|have * with you|get * out|get * to you|out to you|your way|pack|prepare|"
    # overriding the policy: "we'll refund you anyway", "as a goodwill gesture", "just this once"
    "anyway|regardless|all the same|goodwill|exception|one off|just in case|this once|"
    # certainty about the outcome is a promise: "your refund is basically guaranteed"
    "guarantee|assure|for sure|sure thing|done deal|in the bag|no question|"
    # the remedy reported done: "the refund for order X is done"
    "refund be do|refund be now do|refund be all do|refund for * be do|refund be sort|refund for * be sort|"
    "replacement be do|replacement be sort|replacement for * be do|"
    "return to * card|return to * account|return to * payment"
)
# A remedy verb in the future or the perfect: "we will reimburse you", "we've now fully replaced it".
_REMEDY_VERBS = frozenset({"refund", "reimburse", "repay", "replace", "exchange", "swap", "credit", "resend", "reship"})
_ADVERBS = frozenset(
    {
        "now",
        "already",
        "just",
        "be",
        "fully",
        "also",
        "gladly",
        "happily",
        "personally",
        "promptly",
        "quickly",
        "then",
        "since",
    }
)
# Modality and undecidedness: a remedy next to these is offered, not granted. Process words ("review",
# "team will", "request") are not hedges: "approved, and our team will finalise it" decides.
_HEDGE = Phrases(
    "might|may|could|possibly|possible|perhaps|probably|likely|potentially|whether|eligible|eligibility|decide|"
    "decision|assess|consider|evaluate|determine|try|attempt|hope|look into|look at|investigate|see if|pending|"
    "subject to|in principle|would you like|do you want|prefer|rather|they find|we find|if any|if there be|"
    # ability and confidence about our own act: "we should be able to refund you", "in theory we can"
    "we should be able|i should be able|we ought to|i ought to|we ought to be able|we hope to|i hope to|in theory|"
    "theoretically|all be well|all being well|confident * can|confident * will be able|confident * should"
)
# The agent's own authority, not a grant: "above the amount I can approve myself", "needs sign-off"
# (and "I can't approve a refund of this size myself": what the agent *can* do on its own).
_AUTHORITY = Phrases(
    "my own authority|my approval|my authority|my limit|above what i|beyond what i|amount i can|more than i can|"
    "limit i can|approve * myself|authorise * myself|authorize * myself|need * approval|need * sign off|"
    "require * approval|require * sign off|need to be approve|have to be approve|need * authorisation|"
    "need * authorization"
)
# A remedy named as the subject of the ticket, not given: "your refund request", "asked for a replacement",
# "the team that handles refunds", "they'll get back to you about your refund".
_TOPIC_OF = (
    "get back to you about",
    "in touch about",
    "in touch regarding",
    "contact you about",
    "let you know about",
    "update you on",
    "update you about",
    "next step for",
    "next step on",
    "next step regarding",
    "handle",
)
_MENTION = Phrases(
    "refund request|refund claim|refund query|refund question|refund application|replacement request|"
    "replacement claim|request * refund|request * replacement|ask for * refund|ask for * replacement|"
    "ask * about * refund|refund of this size|refunds of this size|large refund|larger refund|higher value refund|"
    "high value refund|refund of this value|refund of this amount|"
    + "|".join(f"{t} * {r}" for t in _TOPIC_OF for r in ("refund", "replacement"))
)
# Foretelling the team's decision decides it: "they always approve these".
_ANTICIPATE = Phrases(
    "always approve|always accept|always agree|sure to approve|certain to approve|bound to approve|"
    "definitely approve|will definitely|certainly approve|as good as approve|as good as done"
)
# Approving the claim itself, without naming a remedy: "your return for order X is approved".
_CLAIM = Phrases("your return|your claim|your request|your case|this return|this claim|this request")
_APPROVE = Phrases("approve|accept|authorise|authorize|grant")
# Conditions that leave the outcome open: a decision or a finding. Others
# (the customer's own action, a step of the process) still promise: "if you post it back we'll
# refund you", "will be sent once our team has finished its review".
_DECIDING = Phrases(
    "approve|agree|accept|decide|decision|confirm|verify|find|eligible|qualify|authorise|authorize|sign off|"
    "go through|turn out|show|prove|due|owe|entitle|right|correct|need|"
    "in stock|available|possible|valid|genuine|pass"
)
# The customer's choice: "if you'd like one", "would you prefer a refund?". A remedy on the customer's
# choice is at their disposal: declining it and offering it so contradicts the decision.
_CHOICE = Phrases("like|prefer|rather|want|wish|choose")
_REFUSE_VERB = Phrases(
    "decline|reject|deny|refuse|turn down|unable to|ineligible|not eligible|no longer eligible|"
    "too early to|too soon to|too early for|too soon for|hold off"
)
_REFUSE_OBJECT = Phrases(
    "approve|accept|offer|process|issue|provide|give|refund|replace|replacement|exchange|honour|honor|do|help|return|"
    "cover|covered|eligible|possible|proceed|take back|take * back|accept * back|authorize|authorise|grant|send|qualify"
)
# Saying nothing is decided yet is neither a grant nor a refusal: "not approved or refused anything yet".
_REFUSE_ACT = Phrases("decline|reject|deny|refuse|turn down")
_DECISION_WORDS = Phrases("approve|accept|agree|decide|decision|refuse|decline|reject|turn down|deny|confirm")
_UNDECIDED = Phrases(
    "no decision|not * decide|not * make * decision|undecided|not yet * approve|not promise|"
    "not guarantee|not say whether|not say * yet|either way|"
    "not * approve * or|not * accept * or|nothing * approve|nothing * decide"
)
# Speculating on what the team will decide prejudges it: "honestly I doubt they'll accept it", "I'd expect
# them to approve it". (Expecting them to be in touch is no speculation on the outcome.)
_SPECULATE = Phrases(
    "doubt|expect|think|believe|bet|sure|imagine|suspect|unlikely|likely|probably|chance|hope|guess|reckon|"
    "confident|optimistic|pessimistic|afraid they|hold your breath|would be surprised|wouldn't be surprised"
)
_DECIDES = Phrases(
    "accept|approve|refund|replace|decline|reject|refuse|agree|go through|succeed|grant|say yes|say no|"
    "turn down|in your favour|in your favor|favourable|favorable|cover it|honour|honor"
)
_HOLD = Phrases(
    "pass|forward|escalate|hand|refer|assign|transfer|team|department|colleague|specialist|review|look into|"
    "looking into|"
    "investigate|get back|be in touch|update you|contact you|follow up|reach out|take it from here|take over|handle|"
    "send * to|now with|be with our|be with the"
)
# "Someone will be in touch" passes the ticket on to no one in particular: a holding reply says who.
_ANYONE = frozenset({"someone", "somebody", "anyone", "anybody"})
_WHO = Phrases("team|department|colleague|specialist|agent|manager|supervisor|expert|staff")


def _nobody_named(tokens: tuple[str, ...]) -> bool:
    return any(t in _ANYONE for t in tokens) and not _WHO.in_(tokens)


_COURTESY = Phrases(
    "thank|thanks|sorry|apologize|apologise|apology|apologies|please|appreciate|understand|happy to help|glad to help|"
    "regards|sincerely|have a great day|have a good day|have a nice day|our pleasure|hope this help|hope that help|"
    "kind regard|best wish|take care|we value|happy to|glad to|glad|so glad|enjoy|relief|have a lovely|"
    "have a wonderful|"
    "have a great|have a good|have a nice|hope you|warm regard|warmly|cheers|my pleasure|you be welcome|all the best"
)
_RUDE = Phrases(
    "stupid|idiot|idiotic|dumb|moron|shut up|calm down|your fault|your own fault|not our problem|deal with it|"
    "stop complain|"
    "stop whine|stop bother|read the policy|learn to read|ridiculous|nonsense|pathetic|waste of * time|obviously you|"
    "should have know|should have read|get over it|tough luck|too bad|whatever|someone else's problem|not believe you|"
    "not believe your|try not to break|try not to lose|try not to damage|do you even|did you even|have you even|"
    "do you not read|did you not read|stop send|stop email|stop contact|stop message|not contact us again|"
    "not email us again|it say so|not add up|not * add up|not * tally|not * match up|not * stack up|you be lie|"
    "make it up|"
    "make this up|not tell the truth|not be honest|"
    # deflecting the responsibility: "that's between you and the courier", "not our job"
    "not our job|not our responsibility|not our concern|not our issue|not our business|nothing to do with us|"
    "not up to us|take it up with|between you and the|courier s problem|carrier s problem|bank s problem|your problem|"
    "problem not ours|not ours to|"
    # condescension: "obviously we won't", "frankly"
    "obviously|frankly|to be frank|quite frankly|"
    # lecturing about the rules: "read our returns policy before contacting us"
    "before contact us|before contact we|before get in touch|before write to us|before email us|before message us|"
    "before you order|before order|before you buy|before buy|before complain|you should read|you need to read|"
    "you must read|you ought to read|should have bother|have bother to|if you have bother|familiarise yourself|"
    "familiarize yourself|it be all in the|it be clearly state|clearly explain in|"
    # brushing the customer off: "that's just how it is, take it or leave it"
    "take it or leave it|like it or not|just how it be|just the way it be|end of story|end of discussion|that be final|"
    "no way|no chance|forget it|nope|way past|way over|way outside|"
    # rhetorical questions that mock the customer: "who returns something after using it?"
    "who return|who do that|who buy|who in their right mind|what do you expect|what else do you expect|"
    "not sure what you expect|"
    "why would you|why do you even|how hard can it be|how hard be it|how difficult can it be"
)
# Interjections that make a sentence sarcastic on their own: "Come on -", "Seriously?".
_SCOFFS = frozenset(
    {
        ("come", "on"),
        ("oh", "come", "on"),
        ("come", "on", "now"),
        ("seriously",),
        ("really",),
        ("oh", "please"),
        ("not", "happen"),
        ("that", "be", "not", "happen"),
        ("it", "be", "not", "happen"),
        ("no",),
        ("nope",),
        ("tough",),
        ("sorry", "not", "sorry"),
    }
)
# Blame and lecturing: the customer is told what they did wrong or must do better. Read on the reply
# without its idioms and never where negated, so "not your fault" and "no fault of your own" never count.
_LECTURE_TIMES = ("next time", "in future", "in the future", "going forward", "from now on")
_LECTURE_ACTS = (
    "read",
    "check",
    "make sure",
    "double check",
    "measure",
    "ensure",
    "look at",
    "follow",
    "pay attention",
)
_BLAME = Phrases(
    # what the customer did wrong
    "you * misread|misread your|you * misunderstand|your carelessness|your mistake|your error|user error|you mishandle|"
    "you misuse|you mistreat|you * damage it|you break it|you drop|you have drop|you leave * out|you forget|"
    "you fail to|"
    "you neglect|you ignore|you do not bother|you have not bother|not even bother|if you have bother|you should know|"
    "you should be aware|surely you|you must have know|you clearly|"
    # speculation about how the item was treated
    "not be look after|look after badly|down to how|how you handle|at your end|on your end|probably drop|"
    "probably be drop|must have be drop|must have drop|drop at some point|be misuse|"
    # what it would have taken
    "if you would read|if you have read|quick if you|easy if you|you would have see|you would have know|"
    "you would have notice|you would have find|would have be avoid|could have be avoid|if you have look after|"
    "if you would look after|"
    # telling them to do better, or that they were told
    "please be more careful|you be more careful|you to be more careful|please take more care|look after * properly|"
    "take better care|take more care|read * carefully|more carefully in future|more carefully next time|"
    "read * properly|"
    "as * already explain|as we already|as i already|as already state|already tell you|as i say before|as i have say|"
    "for the last time|clearly say|clearly state|as it clearly|"
    + "|".join(f"{t} * {a}|{a} * {t}" for t in _LECTURE_TIMES for a in _LECTURE_ACTS)
)
# A request about the customer's future conduct is a lecture ("Please treat your things with more care in
# future"), unless it invites them back ("next time, feel free to contact us") or is about ourselves.
_LECTURE_TIME = Phrases("|".join(_LECTURE_TIMES) + "|more care|more carefully|more attention|closer attention")
_CARE = Phrases("more care|more carefully|more attention|closer attention|be careful|be more careful|take care of it")
_INVITATION = Phrases(
    "feel free|hesitate|contact|get in touch|reach out|let us know|visit|shop|order again|enjoy|"
    "use code|discount|welcome|happy to help|glad to help|we will|we be|i will|i be|we can|i can|you can|"
    "you may|you be welcome"
)
# The customer's record of returns, disputes and claims, with how often: "you've disputed charges with us
# a few times before", "you've returned several items lately".
_HISTORY_ACT = Phrases(
    "you have return|you have dispute|you have claim|you have complain|you have request|you have ask for|"
    "you have make * claim|you have make * return|you have open * case|you dispute|you return|"
    "you have send back|you send back|you have send * back|you send * back|you have raise|you raise|"
    "you have file|you file|you have charge back|dispute you have|dispute you raise|dispute you make|"
    "claim you have|claim you make|return you have|return you make|refund you have|item you have return|"
    "order you have return|parcel you have send|order you have send|you have cancel|you have reverse"
)
_FREQUENCY = Phrases(
    "a few time|several time|many time|multiple time|number of time|a lot|recently|lately|often|"
    "frequent|so many|quite a few|more than once|repeatedly|every time|each time|this year|this month|"
    "this week|past year|last year|last month|in the past|over the past|last few|past few|previously|"
    "in the last|how many|number of|before now|so far this"
)
# A count of the customer's past returns, claims or disputes: "eight orders", "five items", "3 returns".
_COUNTED = re.compile(
    r"\b(?:two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|several|many|multiple|numerous|[2-9]|\d{2,})"
    r"\s+(?:\w+\s+)?(?:orders?|items?|parcels?|packages?|returns?|claims?|disputes?|refunds?|times|chargebacks?|"
    r"purchases?)\b"
)
# Hindsight about what the customer did: "you should have tried it on", "you could have checked". Read on
# the words, as it needs the participle: "you should have received an email" / "have your refund by
# Friday" state an expectation, and "you might have missed our email" reproaches nobody.
_HINDSIGHT = re.compile(
    r"\byou (?:should|ought to|must) have (\w+)"
    r"|\byou could have (?:checked|read|looked|asked|measured|contacted)\b"
)
_EXPECTED = frozenset({"received", "got", "gotten", "seen", "heard", "been", "had"})
# Hindsight in the passive: "this really should have been raised sooner".
_PASSIVE_HINDSIGHT = re.compile(
    r"\b(?:should|ought\s+to)\s+(?:really\s+|probably\s+)?have\s+been\s+\w+\b[^.!?]{0,40}?"
    r"\b(?:sooner|earlier|before\s+now|in\s+time|at\s+the\s+time|straight\s+away|right\s+away|first)\b"
)
_PARTICIPLE = re.compile(r"\w+(?:ed|en|wn)|read|known|thought|done|made|told|sent|bought|kept|put|left|tried")
# "if the charge still shows at your end", "please check on your end": a place, not blame.
_CHECKING = frozenset(
    {
        "check",
        "look",
        "see",
        "confirm",
        "clear",
        "refresh",
        "try",
        "verify",
        "show",
        "appear",
        "still",
        "everything",
        "anything",
        "if",
        "fine",
        "ok",
        "okay",
        "display",
        "pending",
        "visible",
    }
)
_LEAK = Phrases(
    # fraud and risk reviews
    "fraud team|fraud review|fraud check|fraud investigation|fraud flag|fraud department|fraud alert|fraud suspicion|"
    "fraud risk|fraud prevention|suspect fraud|suspected fraud|suspicion of fraud|fraudulent|high risk|risk score|"
    "risk assessment|risk rating|risk level|risk profile|risk check|risk team|risk review|blacklist|black list|"
    "watch list|watchlist|internal note|abuse|red flag|warning sign|"  # "no red flags on our end"
    "pass our check|pass the check|pass check|security check|security team|"
    "security review|unusual activity|suspicious|under investigation|"
    # flags and reviews of the account
    "flag account|account * flag|flag for|flag on your|flag your|flagged your|account review|review of your account|"
    "check on your account|check of your account|check against your account|check into your account|account check|"
    # screening and marks on the account in other words: "your account has come up in our routine screening"
    "screening|screened|come up in our|mark your profile|mark your account|note on your account|note on your profile|"
    "your profile for|profile be mark|profile be flag|"
    # something noticed about the account: "an unusual pattern on your account"
    "unusual * on your account|pattern on your account|activity on your account|unusual pattern|odd pattern|"
    "strange pattern|"
    "irregular activity|irregularity|anomaly|anomalous|"
    "look into your account|look at your account|look closely at your account|"
    "account * under review|account be under|"
    # the customer's history: returns, refunds, claims, disputes, chargebacks, and how often
    "return history|refund history|claim history|dispute history|account * history|history of refund|"
    "history of return|history of claim|chargeback|chargebacks|charge back|too many return|number of return|"
    "several return|many return|several refund|frequent return|return rate|refund rate|claim rate|rate of return|"
    "high return|return frequency|return pattern|pattern of return|return habit|return a lot|return so many|"
    "return several|return many|return * lot of|lot of return|number of item you|item you have return|how often you|"
    "frequently return|often return|previous claim|previous return|earlier return|prior return|prior claim|"
    "return quite a few|quite a few return|return a number of|number of claim|high number|unusual number|"
    "dispute on your account|previous dispute|prior dispute|"
    "reverse payment|payment reversal|charge reversal|reverse charge|reverse transaction|"
    "account show * dispute|account show * chargeback|account show * reverse|account show * return|"
    "account show * claim|"
    "account show * refund|record show * dispute|record show * return|record show * claim|"
    "return this month|return this year|return this week|return in the last|return in the past|"
    # the customer's record in general words: "given your history with us"
    "history with us|your history|your track record|track record with us|your record with us|your past with us|"
    "your past behaviour|your past behavior|your previous behaviour|your previous behavior|"
    # doubting the customer's honesty out loud
    "whether * be genuine|whether * be legitimate|whether * be real|claim be genuine|if * be genuine"
)

_WEAR_DESCRIPTION = (
    "wear and tear|normal wear|ordinary wear|everyday wear|general wear|natural wear|wear from use|"
    "wear through use|everyday use|regular use|normal use|daily use|through use|from use|usage over time|"
    "age and use|expected wear|use over time"
)
_NOT_A_DEFECT = "not a defect|not defective|not a manufacturing|not a fault|not faulty|not a flaw"
# A sentence describing ordinary wear ("the wear that builds up with regular use") uses "wear" and "use"
# for that description, not to say the customer used the item. Use alone ("it has been in regular use")
# describes wear only beside what wear leaves: marks, scuffs, what the photos show, "rather than a fault".
_DESCRIBES_WEAR = Phrases(_WEAR_DESCRIPTION)
_USE_ONLY = Phrases("everyday use|regular use|normal use|daily use|through use|from use|usage over time|use over time")
_WEAR_SIGNS = Phrases(
    "wear|tear|mark|scuff|scratch|scrape|photo|picture|image|pic|defect|fault|damage|fade|fray|crack|chip|"
    "dent|stain|pill|bobble|sign|consistent|rather than|look|show|flaw"
)


def _describes_wear(sentence: tuple[str, ...]) -> bool:
    if not _DESCRIBES_WEAR.in_(sentence):
        return False
    plain = _drop(sentence, _USE_ONLY)
    return plain != sentence and _WEAR_SIGNS.in_(plain) or _DESCRIBES_WEAR.in_(plain)


# Plain arrivals: the parcel found only when no elapsed time dates them ("since your order reached you
# more than 30 days ago" is the delivery, not a missing parcel turning up).
_ARRIVALS = "got it|get it|reach you|you have it|you have receive it|you receive it|since you have|as you have it"
_ARRIVAL_ONLY = Phrases(_ARRIVALS)
_ELAPSED_TIME = re.compile(
    r"\bago\b|\b(?:days?|weeks?|months?|years?)\s+since\b|\bsince\s+(?:you|it|the|your|they)\b.*"
    r"\b(?:got|received|arrived|delivered|reached|had)\b|\bhad\s+(?:it|them|the\s+\w+)\s+for\b|"
    r"\bfor\s+(?:over\s+|more\s+than\s+)?\d+\s+(?:days?|weeks?|months?)\b"
)
_LOST = (
    "lose in transit|lose in the post|lose in the mail|lose by the carrier|lose by the courier|lose by the delivery|"
    "lose during delivery|lose on the way|lose en route|lose with the carrier|lose with the courier|go miss in transit|"
    "go miss in the post|go miss on the way|go miss en route|miss in transit|courier * lose|carrier * lose|"
    "have be lose|be lose|lose your parcel|lose your package|lose the parcel|lose the package|go astray"
)
_LOST_SPANS = Phrases(_LOST)

# Denial reasons. Each is (phrases, self_negating): a self-negating phrase carries its own negation
# ("not a defect", "only one charge") and is never read as negated.
_REASONS: dict[str, tuple[Phrases, Phrases | None]] = {
    "window": (
        Phrases(
            "return window|returns window|return period|returns period|time limit|time frame|timeframe|deadline|"
            "window|30 day|30 days|thirty day|thirty days|within a month|one month|a month of|month of delivery|"
            "too late|"
            "time to return|expire|expired|day limit|day return"
        ),
        None,
    ),
    # The item's use, not any "use": "the card you used", "please use the portal" assert nothing.
    "used": (
        Phrases(
            "be use|be wear|be wash|be worn|have use|have wear|have wash|you use it|you wear it|you wash it|"
            "use it|wear it|wash it|wear outside|sign of use|sign of wear|been open and use|not in new condition|"
            # in use, not as new: "has been in regular use", "isn't in the as-new condition", "has seen some use"
            "be in use|be in regular use|be in daily use|be in everyday use|see some use|see * use|put to use|"
            "not in * as new|not * as new condition|no longer * as new|not in * like new|not * like new|"
            "no longer * like new|not in * new state|not * good as new|no longer * unused|not * count as unused|"
            "not * class as unused|not * consider unused|take * out on|take * out for|be out on|on a few run|"
            "for a few run|out for a run|"
            "no longer new|not new|not unused|not in * original condition|not in * resalable condition|"
            "not in * sellable|"
            "after use|after wear|use item|used item|worn item|wear item|use a few time|wear a few time|wear once|"
            "use once"
        ),
        None,
    ),
    "final_sale": (
        Phrases(
            "final sale|final-sale|clearance|non returnable|nonreturnable|not returnable|hygiene|hygienic|"
            "personal care|"
            "perishable|perishables|food item|sanitary|intimate|sealed for|health reason|can not be return for hygiene"
        ),
        None,
    ),
    "warranty": (Phrases("warranty|guarantee|guaranty|warranted|cover period|coverage"), None),
    "normal_wear": (Phrases(_WEAR_DESCRIPTION + "|" + _NOT_A_DEFECT), Phrases(_NOT_A_DEFECT)),
    "in_transit": (
        Phrases(
            "in transit|on its way|on the way|en route|still travel|still travelling|still traveling|still move|"
            "still moving|with the carrier|carrier network|carrier's network|courier network|not yet arrive|"
            "yet to arrive|"
            "not arrive yet|expect to arrive|expected to arrive|should arrive|due to arrive|out for delivery|"
            "still be deliver|"
            "still being deliver|has not be deliver yet|not be deliver yet|still in the post|still with the courier|"
            "estimate|estimated delivery|arrive soon|arrive shortly|delivery window|still within * estimate|"
            "still within * delivery|still within * expect|should reach|will reach|should be with you|will be with you|"
            "expect * deliver|"
            # with the carrier and due: "is with the courier and due shortly", "still making its way to you"
            "be with the courier|be with the carrier|be with our courier|be with the delivery|be now with the courier|"
            "be with the postal|due tomorrow|due shortly|due soon|due any day|due in the next|due to be deliver|"
            "due for delivery|on schedule|make * way|still move|on the move|expect within|within * delivery time|"
            "within * normal delivery"
        ),
        Phrases("not yet arrive|yet to arrive|not arrive yet|has not be deliver yet|not be deliver yet"),
    ),
    # The parcel found, not any finding: "we found only one charge", "whatever they find" assert nothing.
    "parcel_found": (
        Phrases(
            "be find|find it|find the parcel|find the package|find your parcel|find your package|parcel * find|"
            "package * find|you find|neighbour find|neighbor find|be locate|locate it|parcel * locate|package * locate|"
            "turn up|turned up|arrive after all|arrive safely|arrive in the end|finally arrive|have now arrive|"
            "glad * arrive|glad you have it|glad you get it|have it now|show up|showed up|"
            "safely with you|with you now|neighbour have|neighbor have|"
            # not lost after all, in your hands: "it wasn't lost after all", "made it to you in the end"
            "not lose after all|not be lose after all|not go miss after all|not get lose after all|miss after all|"
            "there after all|all along|in your hand|make it to you|make it to your|safe and sound|be with you|"
            "you now have|you have now get|you have get it|" + _ARRIVALS
        ),
        None,
    ),
    # A lost parcel is its own fact, never the in-transit reason and never a reason to decline.
    "lost": (Phrases(_LOST), None),
    "not_charged_twice": (
        Phrases(
            "only one charge|single charge|one charge|charged once|charge once|only once|one payment|single payment|"
            "only one payment|one transaction|single transaction|only one transaction|no duplicate|not * charge twice|"
            "not * bill twice|not * charge * twice|pending authorization|pending authorisation|pending hold|"
            "temporary hold|"
            "authorization hold|authorisation hold|drop off|fall off|record show one|record show a single|"
            "show a single|"
            "show one|only charge|one debit|single debit|just one|charge * once|bill * once|take * once|"
            "charge * a single time|bill * a single time|take * a single time|charge * one time|bill * one time|"
            "charge * only once|bill * only once|take * only once|debit * once"
        ),
        Phrases("no duplicate|not * charge twice|not * bill twice|not * charge * twice"),
    ),
    "unverifiable": (
        Phrases("verify|verified|verification|confirm|validate|substantiate|corroborate"),
        None,
    ),
}
# An arrival still to come is the parcel in transit, not found: "it should reach you within a few days".
_PROSPECTIVE = frozenset({"should", "will", "would", "may", "might", "can", "to", "soon", "expect"})
# The warranty reason is the warranty's end, stated in the sentence ("covered by a 180-day warranty, and
# that period has now ended"): its scope ("which our warranty doesn't cover") or a warranty still
# running ("it may still be covered") is no reason to decline.
_EXPIRY = Phrases(
    "expire|end|run out|lapse|be over|pass|outside|beyond|out of|no longer|past|finish|close|elapse|"
    "last * day|only last|only cover * day"
)
_WARRANTY_RUNNING = Phrases("still cover|still under|still within * warranty|still have * warranty|remain under")
# The window still open, in any words: "you're comfortably inside our 30-day window", "it hasn't closed yet".
_WINDOW_OK = Phrases(
    "be within|be still within|still within|well within|comfortably within|you be * within|it be * within|"
    "be inside|within * window|within the return|be * inside|still inside|well inside|inside * window|"
    "not * close yet|not close|not expire|not yet expire|not * expire yet|not pass|not yet pass|not run out|"
    "not end|not yet end|not over|still open|still in time|in good time|plenty of time"
)
_LIMIT_STATEMENT = Phrases(
    "only|must|need|have to|accept|allow|policy|require|up to|limit|after|outside|past|beyond|over|"
    "exceed|more than|expire|close|end|pass|too late|no longer|late|ago|since"
)
_AUX = frozenset(
    {"be", "have", "do", "yet", "ever", "at", "all", "really", "actually", "even", "been", "being", "get", "so", "very"}
)
# What a negation reaches through to its verb: auxiliaries, modals and the verbs of a chain
# ("not going to", "not able to", "never dream of", "not want to").
_CHAIN = _AUX | frozenset(
    {
        "will",
        "would",
        "can",
        "could",
        "shall",
        "should",
        "may",
        "might",
        "must",
        "go",
        "to",
        "about",
        "able",
        "want",
        "wish",
        "plan",
        "intend",
        "mean",
        "try",
        "dream",
        "of",
        "ever",
        "just",
        "simply",
    }
)
_MONEY = re.compile(r"\$\s?(\d[\d,]*(?:\.\d{1,2})?)|(\d[\d,]*(?:\.\d{1,2})?)\s?(?:usd|dollars)\b")
_DAYS = re.compile(r"\b(\d{1,4})[\s-]*(day|days|week|weeks|month|months|year|years)\b")
_WORD_DAYS = re.compile(r"\b(" + "|".join(WORD_NUMBERS) + r")[\s-]+(day|days|week|weeks|month|months|year|years)\b")
# A month is a twelfth of a year, so "24 months" is the 730-day warranty and "a month" the 30-day window.
_UNIT_DAYS = {
    "day": 1,
    "days": 1,
    "week": 7,
    "weeks": 7,
    "month": 365 / 12,
    "months": 365 / 12,
    "year": 365,
    "years": 365,
}
_ORDER_DIGITS = re.compile(r"\b(?:ord[-\s#]*)?(\d{6,})\b")


# The teams a reply names, by their queue: "our Billing team", "the returns desk", "handed it to Escalations".
_TEAM_QUEUES = {
    "return": "Returns",
    "returns": "Returns",
    "billing": "Billing",
    "payment": "Billing",
    "payments": "Billing",
    "accounts": "Billing",
    "finance": "Billing",
    "escalation": "Escalations",
    "escalations": "Escalations",
    "fraud": "Fraud",
    "loss prevention": "Fraud",
    "loss-prevention": "Fraud",
    "security": "Fraud",
    "risk": "Fraud",
    "trust and safety": "Fraud",
    "trust & safety": "Fraud",
}
_TEAM = re.compile(
    r"\b(returns?|billing|payments?|accounts|finance|escalations?|fraud|loss[- ]prevention|security|risk|"
    r"trust (?:and|&) safety)(?:[- ](?:and[- ])?(?:refunds?|exchanges?|prevention|operations))?\s+"
    r"(?:teams?|desk|department|dept|departmnet|colleagues?|specialists?|staff|unit|people|folks|squad|group|"
    r"agents?|side|experts?|crew)\b",
    re.I,
)
# A queue's bare name, capitalised, as a team: "passed to Billing", "Escalations will review it" (not "Returns are
# accepted within 30 days").
_BARE_TEAM = re.compile(
    r"(?:\b(?:to|with|from|by|our|cc|copied|looped\s+in|over\s+to|at)\s+(Returns|Billing|Escalations|Fraud)\b)|"
    r"(?:\b(Returns|Billing|Escalations|Fraud)\s+(?:will|'ll|has|have|are\s+(?:now\s+)?(?:reviewing|looking|"
    r"checking|handling|on)|is\s+(?:now\s+)?(?:reviewing|looking|checking|handling|on)|can\s+(?:help|look|check)|"
    r"colleagues?)\b)"
)


_THEIRS = re.compile(r"\b(?:bank|provider|issuer|paypal|lender|company|network)(?:'s|s')?\s+(?:own\s+)?$", re.I)


def _teams(reply: str) -> frozenset[str]:
    found = {
        _TEAM_QUEUES[m.group(1).lower()]
        for m in _TEAM.finditer(reply)
        if not _THEIRS.search(reply[max(0, m.start() - 30) : m.start()])
    }
    found |= {m.group(1) or m.group(2) for m in _BARE_TEAM.finditer(reply)}
    return frozenset(found)


# Arranging the return itself (a label, a collection) accepts it: "will be arranging your return label".
_RETURN_ARRANGED = Phrases(
    "send * label|email * label|send you * label|email you * label|post you * label|attach * label|arrange * label|"
    "generate * label|issue * label|label be attach|"
    "label be on its way|book * collection|arrange * collection|book * courier|arrange * courier|arrange * pickup|"
    "book * pickup|arrange * pick up|book * pick up|courier to collect|collect it from you|collect the item|"
    "arrange * return for you|book * return"
)
# Suspicion insinuated, not stated: "we have to be careful with requests like yours", "I think you know why".
_INSINUATION = re.compile(
    r"\b(?:careful|cautious|wary|vigilant|suspicious)\s+(?:with|about|of|around)\s+(?:\w+\s+){0,2}?"
    r"(?:requests?|claims?|cases?|customers?|people|accounts?|orders?|returns?)\b|"
    r"\b(?:requests?|claims?|cases?|customers?|people|accounts?|situations?)\s+(?:like|such\s+as)\s+(?:yours|you)\b|"
    r"\b(?:requests?|claims?|cases?)\s+of\s+this\s+(?:kind|sort|type|nature)\b|"
    r"\b(?:have|has|need|needs|must|got)\s+to\s+be\s+(?:extra\s+|very\s+|really\s+|a\s+bit\s+|more\s+|so\s+)?"
    r"(?:careful|cautious|wary|vigilant)\b(?!\s+(?:to|not|when\s+(?:we|i)|with\s+(?:our|how\s+we)))|"
    r"\byou\s+(?:probably\s+|already\s+|well\s+|surely\s+)?know\s+why\b|\bwe\s+both\s+know\b|"
    r"\bsure\s+you\s+(?:can\s+|will\s+|would\s+)?(?:understand|appreciate|see)\s+why\b"
)
# How the customer treated the item, guessed from the photos: "they look like they've been dropped a fair
# bit", "it seems it was left out in the sun" (not the courier's handling: "dropped in transit").
_MISHANDLED = re.compile(
    r"\b(?:dropped|knocked\s+(?:about|around)|banged\s+(?:about|around|up)|bashed|thrown|tossed|mishandled|misused|"
    r"mistreated|sat\s+on|stood\s+on|stepped\s+on|overloaded|forced|yanked|left\s+(?:out\s+)?(?:in|on|near|out\s+in)\s+"
    r"(?:the\s+)?(?:sun|rain|heat|radiator|car|garden|wet|damp)|left\s+out|stored\s+(?:badly|carelessly|without|"
    r"in\s+(?:a\s+)?"
    r"(?:damp|wet|hot))|carried\s+(?:around\s+)?loose|exposed\s+to|tumble[- ]dried|washed\s+(?:at|"
    r"on)\s+(?:a\s+)?(?:high|hot)|"
    r"chewed|got\s+wet|been\s+wet|treated\s+roughly|handled\s+roughly|roughly\s+handled|stuffed|crammed|squashed|"
    r"shoved|"
    r"jammed|dragged|rolled\s+up\s+tightly|folded\s+(?:up\s+)?tightly|overfilled|overstretched|over-stretched)\b"
)
_SPECULATION = re.compile(
    r"\b(?:look(?:s|ed)?\s+(?:like|as\s+if|as\s+though)|seems?|seemed|appears?|suggests?|consistent\s+with|"
    r"must\s+have|probably|likely|signs?\s+of|evidence\s+of|indicates?|by\s+the\s+look|i\s+would\s+say|"
    r"a\s+fair\s+bit|a\s+lot|quite\s+a\s+bit|repeatedly|several\s+times|regularly|often|heavily|"
    r"a\s+few\s+times|for\s+long\s+periods)\b"
)
_SOMEONE_ELSE = re.compile(
    r"\b(?:parcel|package|courier|carrier|transit|post|postal|delivery|driver|shipping|shipment|"
    r"warehouse|packing|packed|dispatch|on\s+the\s+way|we|our|us)\b"
)


def _insinuates(text: str) -> tuple[str, ...]:
    found = [m.group(0) for m in _INSINUATION.finditer(text)]
    for sentence in sentences(text):
        m = _MISHANDLED.search(sentence)
        if (
            m
            and _SPECULATION.search(sentence)
            and not _SOMEONE_ELSE.search(sentence)
            and not _negated_near(sentence, m.start())
        ):
            found.append(sentence)
    return tuple(found)


def _negated_near(sentence: str, at: int) -> bool:
    return re.search(r"\b(?:not|never|no)\b(?:\s+\w+){0,3}\s*$", sentence[:at]) is not None


# A fraud function that is not ours is general advice: "your card provider's fraud team can help".
_THIRD_PARTY = frozenset({"bank", "provider", "issuer", "paypal", "lender", "insurer", "police", "company", "network"})
# The customer's record with an ordinal or none, not only a count: "the third claim on your account this year",
# "the missing-parcel claims already on your account", "as this is your first return with us".
_RECORD = r"(?:returns?|claims?|refunds?|disputes?|chargebacks?|complaints?|reversals?)"
_CLAIM_KIND = (
    r"(?:(?:damage|damaged|missing|missing-parcel|lost-parcel|parcel|delivery|refund|return|billing|warranty|"
    r"change-of-mind|size|non-delivery|item)\s+)?"
)
_ORDINAL_RECORD = re.compile(
    r"\b(?:first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|another|latest|yet\s+another|"
    r"one\s+more|\d+(?:st|nd|rd|th))\s+"
    + _CLAIM_KIND
    + _RECORD
    + r"\b(?!\s+(?:label|form|address|instructions?|portal|link|slip|window|period|policy))"
)
_ORDINAL_TIME = re.compile(
    r"\b(?:first|second|third|fourth|fifth|another|\d+(?:st|nd|rd|th))\s+time\s+(?:that\s+)?you\s+"
    r"(?:have\s+)?(?:asked|returned|claimed|complained|requested|sent|disputed|raised|reported|made|"
    r"filed|opened|reversed|charged)\b"
)
_PAST_RECORD = re.compile(
    r"\b(?:previous|earlier|prior|past|recent|older)\s+(?:[\w-]+\s+)?" + _RECORD + r"\b|"
    r"\b(?:your|the)\s+last\s+" + _RECORD + r"\b"
)
_PLURAL_RECORD = re.compile(
    r"\b(?:returns|claims|refunds|disputes|chargebacks|complaints|reversals|reports|"
    r"parcels\s+(?:reported|claimed)\s+(?:as\s+)?(?:missing|lost|damaged))\b(?!\s+(?:window|period|policy|"
    r"label|team|portal|process|address|desk|department|form|page|limit|rules?|colleagues|specialists))"
)
_ON_RECORD = re.compile(
    r"\b(?:on|against)\s+your\s+account\b|\bon\s+(?:your\s+)?(?:file|record)\b|\byour\s+record\b|"
    r"\byour\s+(?:[\w-]+\s+)?" + _RECORD + r"\s+(?:with|to)\s+us\b|\b(?:had|received)\s+from\s+you\b|"
    r"\byou\s+have\s+(?:already\s+)?(?:made|raised|filed|opened|submitted|logged)\b"
)


def _record_mentions(text: str) -> tuple[str, ...]:
    out = []
    for sentence in sentences(text):
        if not re.search(r"\byou(?:r)?\b", sentence):
            continue
        if (
            _ORDINAL_RECORD.search(sentence)
            or _ORDINAL_TIME.search(sentence)
            or _PAST_RECORD.search(sentence)
            or (_PLURAL_RECORD.search(sentence) and _ON_RECORD.search(sentence))
        ):
            out.append(sentence)
    return tuple(out)


@dataclass(frozen=True)
class Meaning:
    grants: frozenset[str]  # granted unconditionally: "refund", "replacement", or "claim" (the claim itself approved)
    offers: frozenset[str]  # remedies mentioned only on an open condition, hedged or as a question
    refuses: bool  # an unconditional refusal (of a remedy, the claim, the return)
    holds: bool  # says the ticket is being passed on / looked into
    reasons: frozenset[str]  # denial reasons asserted
    window_days: frozenset[int]  # return-window lengths stated
    warranty_days: frozenset[int]  # warranty lengths stated
    amounts: frozenset[float]  # money amounts stated
    order_digits: frozenset[str]  # order numbers quoted (digits)
    courteous: bool
    rude: tuple[str, ...] = field(default=())  # insults, dismissals, blame and lecturing
    leaks: tuple[str, ...] = field(default=())
    options: frozenset[str] = frozenset()  # offers left to the customer's choice: "if you'd prefer a refund"
    prejudges: bool = False  # speculates on the team's decision: "I doubt they'll accept it"
    facts: frozenset[str] = (
        frozenset()
    )  # facts about the order asserted in any reply: the window passed, used, final sale…
    elapsed: tuple[
        tuple[int, str], ...
    ] = ()  # (days, "exact" | "at_least" | "at_most" | "about") since delivery, as stated
    teams: frozenset[str] = frozenset()  # the queues whose teams the reply names: "our Billing team" -> "Billing"
    partial: bool = False  # states a part of the refund ("a partial refund", "half the price"): never the true one


def _negated_before(tokens: tuple[str, ...], start: int) -> bool:
    """A negator governs the phrase at ``start``: auxiliaries, modals and a verb chain may stand in
    between ("we can't approve", "I'm not going to refuse this", "we would never dream of turning it down")."""
    i = start - 1
    while i >= 0 and tokens[i] in _CHAIN:
        i -= 1
    return i >= 0 and tokens[i] in ("not", "no", "never", "nothing", "without", "un")


def _asserted(phrases: Phrases, self_negating: Phrases | None, clause: Clause) -> bool:
    if self_negating is not None and self_negating.in_(clause.lemmas):
        return True
    return any(not _negated_before(clause.lemmas, start) for start, _ in phrases.find(clause.lemmas))


# Adverbs inside a verb group say nothing about the reason: "it has clearly been used", "you've obviously
# worn it" read as "has been used", "have worn it". ("only" and "-ly" nouns and adjectives stay.)
_KEEP_LY = frozenset(
    {
        "only",
        "family",
        "early",
        "reply",
        "apply",
        "supply",
        "rely",
        "daily",
        "weekly",
        "monthly",
        "yearly",
        "likely",
        "unlikely",
        "july",
        "italy",
        "fly",
        "ally",
        "holy",
        "ugly",
        "jelly",
        "belly",
    }
)


def _without_adverbs(clause: Clause) -> Clause:
    kept = tuple(t for t in clause.lemmas if not (t.endswith("ly") and len(t) > 4 and t not in _KEEP_LY))
    return clause if kept == clause.lemmas else replace(clause, lemmas=kept)


def _reasons(clause: Clause) -> set[str]:
    """The denial reasons ``clause`` asserts: each read by its own rule, or else asserted un-negated ("the
    warranty may have expired" asserts nothing)."""
    if _MAYBE & set(clause.lemmas):
        return set()
    clause = _without_adverbs(clause)
    found = set()
    for name, (phrases, self_negating) in _REASONS.items():
        reader = _REASON_READERS.get(name)
        if reader(phrases, clause) if reader is not None else _asserted(phrases, self_negating, clause):
            found.add(name)
    return found


def _window_reason(phrases: Phrases, clause: Clause) -> bool:
    """A limit stated as passed or binding, not "you're well within the 30-day return period". The limit
    may sit in another clause of the sentence: "Our returns period is one month from delivery, and since
    it arrived 41 days ago, I'm unable to accept the return"."""
    tokens, sentence = clause.lemmas, lemmas(clause.sentence)
    if not phrases.in_(tokens) or _WINDOW_OK.in_(tokens):
        return False
    return _LIMIT_STATEMENT.in_(sentence) or any(t in NEGATORS for t in without_idioms(sentence))


def _used_reason(phrases: Phrases, clause: Clause) -> bool:
    if _describes_wear(lemmas(clause.sentence)):
        return False
    return any(not _negated_before(clause.lemmas, start) for start, _ in phrases.find(clause.lemmas))


def _wear_reason(phrases: Phrases, clause: Clause) -> bool:
    self_negating = _REASONS["normal_wear"][1]
    if self_negating is not None and self_negating.in_(clause.lemmas):
        return True
    return _describes_wear(lemmas(clause.sentence)) and _asserted(phrases, None, clause)


def _unverifiable_reason(phrases: Phrases, clause: Clause) -> bool:
    return phrases.in_(clause.lemmas) and clause.negated  # "we can't verify", never "we verified"


def _found_reason(phrases: Phrases, clause: Clause) -> bool:
    """The parcel found, not an arrival still to come ("it should reach you") nor a dated delivery
    ("the item reached you 41 days ago", "it's been 44 days since you got it")."""
    tokens = clause.lemmas
    dated = _ELAPSED_TIME.search(clause.sentence) is not None
    plain = {s for s, _ in _ARRIVAL_ONLY.find(tokens)} if dated else set()
    return any(
        not _negated_before(tokens, s)
        and not _PROSPECTIVE & set(tokens[max(0, s - 2) : s])
        and s not in plain
        and not _understands(tokens, s)
        for s, _ in phrases.find(tokens)
    )


def _understands(tokens: tuple[str, ...], s: int) -> bool:
    """ "I totally get it" is understanding the customer, not a parcel arriving: "get" after I or we."""
    before = [t for t in tokens[:s] if t not in _ADVERBS and not t.endswith("ly")]
    return tokens[s] == "get" and bool(before) and before[-1] in ("i", "we")


def _in_transit_reason(phrases: Phrases, clause: Clause) -> bool:
    """Still on its way — a parcel lost in transit is not ("was lost in transit, so we can't refund it")."""
    self_negating = _REASONS["in_transit"][1]
    tokens = _drop(clause.lemmas, _LOST_SPANS)
    if tokens != clause.lemmas and not (self_negating is not None and self_negating.in_(tokens)):
        return any(not _negated_before(tokens, s) for s, _ in phrases.find(tokens))
    return _asserted(phrases, self_negating, clause)


def _lost_reason(phrases: Phrases, clause: Clause) -> bool:
    return any(not _negated_before(clause.lemmas, s) for s, _ in phrases.find(clause.lemmas))


def _warranty_reason(phrases: Phrases, clause: Clause) -> bool:
    if not _EXPIRY.in_(lemmas(clause.sentence)) or (_WARRANTY_RUNNING.in_(clause.lemmas) and not clause.negated):
        return False
    return _asserted(phrases, None, clause)


_REASON_READERS = {
    "window": _window_reason,
    "used": _used_reason,
    "normal_wear": _wear_reason,
    "unverifiable": _unverifiable_reason,
    "parcel_found": _found_reason,
    "warranty": _warranty_reason,
    "in_transit": _in_transit_reason,
    "lost": _lost_reason,
}


# ------------------------------------------------------------------------- outcomes, clause by clause


@dataclass(frozen=True)
class _Outcome:
    grants: frozenset[str] = frozenset()
    offers: frozenset[str] = frozenset()
    refuses: bool = False
    conditional: bool = False  # on an open condition: it asserts no facts either ("if it turns out to be faulty")
    options: frozenset[str] = frozenset()


def _remedies(tokens: tuple[str, ...]) -> set[str]:
    tokens = _drop(_drop(tokens, _MENTION), _NOT_THE_ITEM)
    found = {name for name, p in (("refund", _REFUND), ("replacement", _REPLACE)) if p.in_(tokens)}
    if "refund" not in found and _money_back(tokens):
        found.add("refund")
    if "replacement" not in found and _new_item_sent(tokens):
        found.add("replacement")
    return found


def _money_back(tokens: tuple[str, ...]) -> bool:
    """An amount going back to the customer: "your $313.99 will be back with you by Friday"."""
    return any(
        t.startswith("$") and {"back", "return", "credit"} & set(tokens[i + 1 : i + 6]) for i, t in enumerate(tokens)
    )


# Putting the problem right promises the outcome: "Billing will put it right", "we'll sort that out for you".
_PUT_RIGHT = Phrases(
    "put it right|put this right|put that right|put thing right|make it right|make this right|make thing right|"
    "sort it out|sort this out|sort that out|fix it|fix this|fix that|correct it|correct the charge|"
    "reverse the charge|reverse the extra|reverse the duplicate|cancel the extra|remove the extra|"
    "refund the extra|refund the duplicate|refund the second"
)


def _puts_right(tokens: tuple[str, ...]) -> bool:
    return any(
        any(t in ("will", "shall", "have") for t in tokens[max(0, s - 4) : s]) for s, _ in _PUT_RIGHT.find(tokens)
    )


def _new_item_sent(tokens: tuple[str, ...]) -> bool:
    """A new or the right item on its way, whatever the words between: "we'll get another pair out to
    you", "a brand-new Wireless Earbuds will be dispatched", "the correct lamp will be delivered to you".
    The adjective must qualify a thing ("you're right, we'll refund you" sends no item)."""
    items = [
        i
        for i, t in enumerate(tokens)
        if t in _ITEM and i + 1 < len(tokens) and tokens[i + 1].isalpha() and tokens[i + 1] not in _NOT_A_THING
    ]
    return bool(items) and (_SENT_TO_YOU.in_(tokens) or any(t in _SEND_VERBS for t in tokens))


def _drop(tokens: tuple[str, ...], phrases: Phrases) -> tuple[str, ...]:
    spans = phrases.find(tokens)
    return tuple(t for i, t in enumerate(tokens) if not any(a <= i < b for a, b in spans)) if spans else tokens


def _chooses(part: tuple[str, ...]) -> bool:
    """The customer chooses a remedy ("if you'd prefer", "if you'd rather have a refund", "if you'd like
    one") rather than an action of their own ("if you'd like to return it": still a promise)."""
    choosing = [s for s, _ in _CHOICE.find(part)]
    return bool(choosing) and (bool(_remedies(part)) or any(part[s + 1 : s + 2] != ("to",) for s in choosing))


def _condition_kind(tokens: tuple[str, ...], span: tuple[int, int]) -> str | None:
    """Whether a condition leaves the outcome open ("open"), leaves it to the customer ("choice"), or
    still promises it (None). A decision or a finding leaves it open ("if our team agrees", "once
    approved", "if a second charge did go through"); a step of the process ("once our team has
    finished its review") or the customer's own action ("if you post it back to us") does not."""
    start, end = span
    part = tokens[start:end]
    subject = next((t for t in part[1:] if t not in _AUX), None)
    if subject == "you" and _chooses(part):
        return "choice"
    if _DECIDING.in_(part):
        return "open"
    if tokens[start] in TEMPORAL or subject == "you":
        return None
    return "open"


# Denying an obstacle cancels the negation after it: "there's no reason we can't refund this", "I see no
# reason not to", "nothing is stopping us from refunding it".
_DECIDED = Phrases("have decide|have now decide|have already decide|i decide to|we decide to")
# Modality that leaves a refusal or a reason open: "the warranty may have expired, so we might not be able to help".
# A look already taken is a check done, not a decision still to come ("we'll look at a refund" hedges).
_LOOKED = Phrases(
    "have look at|have look into|have look over|have have a look at|have have a good look at|"
    "have have a close look at|have have a proper look at|have have a quick look at|have take a look at|"
    "have take a good look at|have take a close look at"
)
_MAYBE = frozenset({"may", "might", "maybe", "perhaps", "possibly"})
_USUALLY = Phrases(
    "nearly always|almost always|usually|normally|typically|generally|tend to|rarely|hardly ever|seldom|"
    "more often than not|as a rule|in most case|nine time out of ten"
)
_VERDICT = Phrases(
    "approve|accept|say yes|say no|go through|decline|reject|refuse|turn down|agree|grant|in your favour|"
    "in your favor|get the refund|get a refund|get your refund|get their money|get a replacement"
)

_OBSTACLE_DENIED = Phrases(
    "no reason|nothing stop|nothing prevent|nothing to stop|nothing to prevent|not see why|"
    "not see any reason|no obstacle|no barrier|nothing stand in the way"
)


def _without_double_negation(tokens: tuple[str, ...]) -> tuple[str, ...]:
    """``tokens`` without a denied obstacle and the first negation or refusal it cancels."""
    spans = _OBSTACLE_DENIED.find(tokens)
    if not spans:
        return tokens
    start, end = spans[0]
    rest = list(tokens[end:])
    for i, t in enumerate(rest):
        if t in NEGATORS:
            del rest[i]
            break
    return tokens[:start] + tuple(rest)


def _negators(tokens: tuple[str, ...]) -> list[int]:
    return [i for i, t in enumerate(tokens) if t in NEGATORS and not _REFUSE_VERB.in_(tokens[i : i + 1])]


def _refuses(tokens: tuple[str, ...]) -> bool:
    """A refusal verb that is not itself negated ("we would never refuse" refuses nothing), or a negator
    governing a refusable act within the same proposition ("we can't accept", "nothing to refund")."""
    tokens = without_idioms(tokens)  # "no need to send anything back" refuses nothing
    if any(not _negated_before(tokens, s) for s, _ in _REFUSE_VERB.find(tokens)):
        return True
    objects = [
        s for s, _ in _REFUSE_OBJECT.find(tokens) if not (tokens[s] == "do" and tokens[s + 1 : s + 2] == ("not",))
    ]
    for n in _negators(tokens):
        if _governs_refusal_verb(tokens, n) or _governs_inert_verb(tokens, n):
            continue
        if any(n < s <= n + 6 and not _new_proposition(tokens[n + 1 : s]) for s in objects):
            return True
    return False


# Verbs a negation can govern without refusing anything after them: "that rule doesn't apply when we've
# sent the wrong model", "don't worry, we'll send a new one".
_INERT = frozenset(
    {"apply", "matter", "affect", "count", "change", "mean", "worry", "bother", "concern", "relate", "hurt", "fret"}
)


def _governs_inert_verb(tokens: tuple[str, ...], n: int) -> bool:
    i = n + 1
    while i < len(tokens) and tokens[i] in _CHAIN:
        i += 1
    return i < len(tokens) and tokens[i] in _INERT


def _governs_refusal_verb(tokens: tuple[str, ...], n: int) -> bool:
    i = n + 1
    while i < len(tokens) and tokens[i] in _CHAIN:
        i += 1
    return any(s == i for s, _ in _REFUSE_VERB.find(tokens))


def _new_proposition(between: tuple[str, ...]) -> bool:
    """ "it didn't arrive and we're sending one": "and"/"or" then a subject starts a new proposition."""
    return any(t in ("and", "or") and nxt in ("we", "i", "you", "they", "it") for t, nxt in pairwise(between))


def _undecided(tokens: tuple[str, ...]) -> bool:
    """ "We haven't approved or refused anything yet", "no decision has been made": neither outcome."""
    if _UNDECIDED.in_(tokens):
        return True
    plain = without_idioms(tokens)
    if not any(t in NEGATORS for t in plain):
        return False
    either = _APPROVE.in_(plain) and _REFUSE_ACT.in_(plain) and ("or" in plain or "nor" in plain)
    return either or ("yet" in plain and _DECISION_WORDS.in_(plain))


# Facts about the order itself, false in any reply when untrue ("Although it's outside our 30-day window,
# we'll refund you anyway" on a ticket delivered 24 days ago). The window counts only as stated passed:
# an approval may well quote the limit ("returns are accepted within 30 days").
_ORDER_FACTS = frozenset({"used", "final_sale", "warranty", "normal_wear"})
_WINDOW_PASSED = Phrases(
    "outside|past|beyond|exceed|expire|close|too late|no longer|over our|over the|after the|miss|run out|lapse|end"
)


def _elapsed(text: str) -> tuple[tuple[int, str], ...]:
    """The time since delivery the reply states ("it arrived 43 days ago", "it has been more than 30
    days since you received it", "you've had it for six weeks"), with how it is qualified."""
    out = []
    for days, start, end in _lengths(text):
        before, after = text[max(0, start - 60) : start], text[end : end + 60]
        if not (
            _ARRIVED_BEFORE.search(before)
            or (_ELAPSED_AFTER.match(after) and _ARRIVAL_NEAR.search(before))
            or _SINCE_ARRIVAL.match(after)
        ):
            continue
        qualifier = _QUALIFIER.search(before[-25:])
        kind = "exact" if qualifier is None else _QUALIFIERS[qualifier.group(1)]
        unit = text[start:end].split()[-1].rstrip("s").split("-")[-1]
        out.append((days, kind if kind != "exact" or unit == "day" else "about"))
    return tuple(out)


_ARRIVAL = (
    r"(?:delivered|arrived|received|reached you|got (?:it|them|to you)|came|turned up|"
    r"had\b[\w\s'-]{0,40}?\bfor|had (?:it|them))"
)
_ARRIVED_BEFORE = re.compile(
    _ARRIVAL + r"\s+(?:with you\s+|to you\s+)?(?:(?:over|more than|about|around|nearly|almost|some|only|"
    r"just|roughly|approximately|at least|less than|under|just over|just under)\s+)?$"
)
_ARRIVAL_NEAR = re.compile(r"\b(?:delivered|arrived|received|reached|got|came|delivery)\b")
_SINCE_ARRIVAL = re.compile(
    r"\s+since\s+(?:(?:it|you|the|your|they)\s+)?(?:\w+\s+){0,3}?" + _ARRIVAL + r"|\s+since\s+delivery"
)
_QUALIFIER = re.compile(
    r"\b(over|more than|at least|just over|nearly|almost|about|around|roughly|approximately|some|"
    r"less than|under|just under|only|more then|less then)\s+$"
)  # "more then 30 days": the common misspelling compares just the same
_QUALIFIERS = {
    "over": "at_least",
    "more than": "at_least",
    "at least": "at_least",
    "just over": "at_least",
    "nearly": "about",
    "almost": "about",
    "about": "about",
    "around": "about",
    "roughly": "about",
    "approximately": "about",
    "some": "about",
    "less than": "at_most",
    "more then": "at_least",
    "less then": "at_most",
    "under": "at_most",
    "just under": "at_most",
    "only": "exact",
}


def _elapsed_true(days: int, kind: str, actual: int) -> bool:
    if kind == "at_least":
        return actual >= days
    if kind == "at_most":
        return actual <= days
    if kind == "about":
        return abs(actual - days) <= max(3, round(0.2 * days))
    return abs(actual - days) <= 1


_APPROVAL_WORDS = frozenset(
    {
        "approve",
        "confirm",
        "grant",
        "accept",
        "process",
        "issue",
        "complete",
        "authorise",
        "authorize",
        "yes",
        "do",
        "arrange",
        "send",
        "dispatch",
    }
)


def _bare_approval(tokens: tuple[str, ...]) -> bool:
    """A clause that is only an approval ("approved", "confirmed and processed"), as in "Refund: approved"."""
    return (
        bool(tokens)
        and any(t in _APPROVAL_WORDS for t in tokens)
        and all(t in _APPROVAL_WORDS or t in ("be", "now", "all", "fully", "and", "already") for t in tokens)
    )


_DONE_SO = Phrases("do so|do that|do this|do it|do just that")


def _future_or_done_so(tokens: tuple[str, ...]) -> bool:
    """ "I've now done so", "we will do that" (or a clause ending in "done", cut before its "so")."""
    found = _DONE_SO.find(tokens)
    if found:
        i = found[0][0]
    elif tokens[-1:] == ("do",):
        i = len(tokens) - 1
    else:
        return False
    j = i - 1
    while j >= 0 and tokens[j] in _ADVERBS:
        j -= 1
    return j >= 0 and tokens[j] in ("will", "have", "shall")


def _future_or_done(tokens: tuple[str, ...]) -> bool:
    for i, token in enumerate(tokens):
        if token in _REMEDY_VERBS:
            j = i - 1
            while j >= 0 and tokens[j] in _ADVERBS:
                j -= 1
            if j >= 0 and tokens[j] in ("will", "have", "be", "shall"):
                return True
    return False


# Verbs of our own that give nothing: "I'll look into the refund", "we'll explain the refund process".
_NOT_GIVING = frozenset(
    {
        "consider",
        "review",
        "look",
        "check",
        "discuss",
        "talk",
        "explain",
        "assess",
        "decide",
        "need",
        "want",
        "like",
        "wish",
        "try",
        "hope",
        "request",
        "ask",
        "chase",
        "query",
        "investigate",
        "see",
        "think",
        "note",
        "pass",
        "forward",
        "escalate",
        "refer",
        "hand",
        "mention",
        "flag",
        "follow",
        "keep",
        "let",
        "update",
        "cancel",
        "stop",
        "hold",
        "pause",
        "reverse",
        "block",
        "refuse",
        "decline",
        "reject",
        "deny",
        "be",
        "have",
        "do",
        "not",
        "never",
        "no",
        "that",
        "this",
        "a",
        "an",
        "the",
        "your",
        "our",
        "it",
        "you",
        "to",
        "about",
        "on",
        "for",
        "monitor",
        "track",
        "watch",
        "confirm",
        "verify",
        "wait",
        "owe",
        "lose",
    }
)
_ACT_FILLERS = frozenset(
    {
        "still",
        "go",
        "ahead",
        "and",
        "just",
        "now",
        "also",
        "then",
        "right",
        "away",
        "quickly",
        "happily",
        "gladly",
        "personally",
        "definitely",
        "certainly",
        "already",
        "today",
        "immediately",
    }
)
_IRREGULAR_PARTICIPLES = frozenset(
    {
        "put",
        "sent",
        "got",
        "done",
        "made",
        "set",
        "run",
        "given",
        "paid",
        "sorted",
        "shot",
        "stuck",
        "thrown",
        "chucked",
        "bunged",
        "pushed",
        "popped",
        "knocked",
    }
)


def _acted_on(clause: Clause) -> set[str]:
    """Remedies that are the object of our own act, in any verb: "I'll push a refund through", "I'm
    putting a replacement in the post", "we've actioned a full refund". The verb must be ours (I, we),
    in the future, the perfect or the progressive, and give something (not "look into", "explain")."""
    tokens, raw = clause.lemmas, words(clause.text)
    found: set[str] = set()
    for i, t in enumerate(tokens[:-1]):
        if t not in ("i", "we") or len(raw) != len(tokens):
            continue
        j, aux = i + 1, tokens[i + 1]
        if aux not in ("will", "shall", "have", "be"):
            continue
        j += 1
        if aux == "be" and tokens[j : j + 2] == ("go", "to"):
            j, aux = j + 2, "will"
        while j < len(tokens) and tokens[j] in _ACT_FILLERS and not (tokens[j] == "go" and aux == "will"):
            j += 1
        if j >= len(tokens) or tokens[j] in _NOT_GIVING or tokens[j] in NEGATORS or not tokens[j].isalpha():
            continue
        word = raw[j]
        if aux == "have" and not (word.endswith(("ed", "en")) or word in _IRREGULAR_PARTICIPLES):
            continue
        if aux == "be" and not word.endswith("ing"):
            continue
        found |= _remedies(tokens[j + 1 : j + 5])
    return found


def _authority(tokens: tuple[str, ...]) -> bool:
    return _AUTHORITY.in_(tokens) or ("myself" in tokens and ("can" in tokens or "able" in tokens))


def _claim_approved(tokens: tuple[str, ...]) -> bool:
    """ "Your return for order X is approved": the claim itself is decided, no remedy named."""
    return _CLAIM.in_(tokens) and any(
        not _negated_before(tokens, s) and tokens[s - 1 : s] != ("to",) for s, _ in _APPROVE.find(tokens)
    )


def _outcome(clause: Clause, inherited: str | None) -> tuple[_Outcome, str | None]:
    """What one clause grants, offers or refuses, and the condition it opens for the rest of its sentence
    ("If they confirm you were charged twice, the extra charge will be refunded"): None, "open", or
    "choice" (the customer's: "If you'd prefer a refund instead, just let me know and I'll arrange it")."""
    tokens, span = clause.lemmas, clause.condition
    kind = _condition_kind(tokens, span) if span is not None else None
    opens = kind if span is not None and span[0] <= 1 and span[1] == len(tokens) else None
    inside: tuple[str, ...] = ()
    outside = tokens
    if kind is not None and span is not None:
        inside, outside = tokens[span[0] : span[1]], tokens[: span[0]] + tokens[span[1] :]
    outside = _without_double_negation(outside)
    offers = _remedies(inside)
    if kind is not None or inherited is not None:
        offers |= _remedies(outside)
        choice = "choice" in (kind, inherited) and not _HEDGE.in_(outside)
        return _Outcome(offers=frozenset(offers), conditional=True, options=frozenset(offers if choice else ())), opens
    if _undecided(outside) or _authority(outside):  # "nothing is decided yet", "more than I can approve myself"
        return _Outcome(offers=frozenset(offers | _remedies(outside))), opens
    if _refuses(outside):  # "we might not be able to help" hedges the refusal: it decides nothing
        return _Outcome(offers=frozenset(offers), refuses=not _MAYBE & set(outside)), opens
    remedies = _remedies(outside)
    plain = without_idioms(outside)
    # a condition that still promises ("once they've looked at it") hedges nothing by its own words
    asserted = outside if span is None else tokens[: span[0]] + tokens[span[1] :]
    asserted = _drop(asserted, _DECIDED)  # "I've decided to let it slide": a decision made is no hedge
    asserted = _drop(asserted, _LOOKED)  # "I've had a good look at your order and refunded it": a check done
    if clause.question or _HEDGE.in_(asserted) or any(t in NEGATORS for t in plain):
        asked = clause.question and _CHOICE.in_(outside)  # "would you like a replacement instead?"
        return _Outcome(offers=frozenset(offers | remedies), options=frozenset(remedies if asked else ())), opens
    grants = set(remedies) if remedies and (_GRANT.in_(outside) or _future_or_done(outside)) else set()
    if _new_item_sent(_drop(_drop(outside, _MENTION), _NOT_THE_ITEM)):  # sending the new item is the grant
        grants.add("replacement")
    if _claim_approved(outside) or _ANTICIPATE.in_(outside) or _RETURN_ARRANGED.in_(outside) or _puts_right(outside):
        grants.add("claim")
    if remedies - grants:  # "I'll push a refund through", "we've actioned a full refund"
        grants |= _acted_on(clause) & remedies
    return _Outcome(grants=frozenset(grants), offers=frozenset(offers | (remedies - grants))), opens


# ------------------------------------------------------------------------- facts and conduct


def _lengths(text: str) -> list[tuple[int, int, int]]:
    """(days, start, end) of every stated duration."""
    out = [(round(int(m.group(1)) * _UNIT_DAYS[m.group(2)]), m.start(), m.end()) for m in _DAYS.finditer(text)]
    out += [
        (round(WORD_NUMBERS[m.group(1)] * _UNIT_DAYS[m.group(2)]), m.start(), m.end())
        for m in _WORD_DAYS.finditer(text)
    ]
    return out


# An elapsed time is never a limit: "delivered 223 days ago", "it has been 45 days since delivery".
_ELAPSED_AFTER = re.compile(r"\s*(?:ago|back|since|now|so far|already)\b")  # "92 days back"
_ELAPSED_BEFORE = re.compile(
    r"\b(?:delivered|arrived|received|waited|been|had\b[\w\s'-]{0,40}?\bfor|used\b[\w\s'-]{0,40}?\bfor)\s+"
    r"(?:(?:over|more than|about|around|nearly|almost|some|only|just)\s+)?$|"
    # restated in brackets after the elapsed time: "more than 30 days since delivery (92 days)"
    r"\b(?:ago|since\s+(?:delivery|arrival|it\s+arrived|you\s+received\s+it))\s*\(\s*$"
)
# A limit needs its own context: "ship within two days" is no return window.
_WARRANTY_CONTEXT = re.compile(r"warrant|guarant|coverage")
_WINDOW_CONTEXT = re.compile(r"return|window|policy|limit|deadline")
# Words shared by windows and warranties ("180 days from delivery", "warranty period"): a window only
# where no warranty is in sight.
_SHARED_CONTEXT = re.compile(r"period|of delivery|from delivery|after delivery|of receiv|of receipt")


# A share of the money: the policy refunds the claim's whole amount (P8), so a part of it is an untrue amount.
_PARTIAL = re.compile(
    r"\b(?:partial|part|half|portion)\s+(?:of\s+)?(?:the\s+|your\s+|a\s+)?(?:refund|price|amount|cost)|"
    r"\b\d{1,2}\s?%\s+(?:refund|of\s+the\s+(?:price|amount|cost))"
)
_NOT_PARTIAL = re.compile(r"\b(?:not|no|never|rather than|instead of)\s+(?:a\s+|the\s+|just\s+|only\s+)*$")


def _durations(text: str) -> tuple[set[int], set[int]]:
    """The return-window and warranty lengths stated: each duration goes to the nearer context."""
    windows: set[int] = set()
    warranties: set[int] = set()
    for days, start, end in _lengths(text):
        before, after = text[max(0, start - 40) : start], text[end : end + 50]
        if _ELAPSED_AFTER.match(after) or _ELAPSED_BEFORE.search(before):
            continue
        warranty, window = _distance(_WARRANTY_CONTEXT, before, after), _distance(_WINDOW_CONTEXT, before, after)
        if warranty is not None and (window is None or warranty <= window):
            warranties.add(days)
        elif window is not None or (warranty is None and _distance(_SHARED_CONTEXT, before, after) is not None):
            # a shared context ("180 days from the date of delivery") belongs to a warranty the same
            # sentence names, even beyond the near context: "the warranty on the {long name} - 180 days …"
            (warranties if window is None and _warranty_sentence(text, start, end) else windows).add(days)
    return windows, warranties


def _warranty_sentence(text: str, start: int, end: int) -> bool:
    """Whether the sentence around ``text[start:end]`` names a warranty and no return window."""
    left = max(text.rfind(stop, 0, start) for stop in (". ", "! ", "? ", "\n"))
    right = min((i for i in (text.find(stop, end) for stop in (". ", "! ", "? ", "\n")) if i >= 0), default=len(text))
    sentence = text[left + 1 : right]
    return _WARRANTY_CONTEXT.search(sentence) is not None and _WINDOW_CONTEXT.search(sentence) is None


def _distance(pattern: re.Pattern[str], before: str, after: str) -> int | None:
    gaps = [len(before) - m.end() for m in pattern.finditer(before)] + [m.start() for m in pattern.finditer(after)]
    return min(gaps) if gaps else None


def _rude(text: str, tokens: tuple[str, ...]) -> tuple[str, ...]:
    """Insults and dismissals, blame and lecturing, in the normalised ``text`` and its lemmas ``tokens``."""
    found = {
        " ".join(tokens[s:e])
        for s, e in _RUDE.find(tokens)
        if not _negated_before(tokens, s) and not _kind_whatever(tokens, s)
    }
    plain = without_idioms(tokens)
    found |= {
        " ".join(plain[s:e])
        for s, e in _BLAME.find(plain)
        if not _negated_before(plain, s) and not _excused(plain, s, e)
    }
    found |= {sentence for sentence in sentences(text) if _lectures(lemmas(sentence))}
    found |= {
        c.text for c in clauses(text) if _lectures(c.lemmas)
    }  # "… so we can't replace it - treat it with more care"
    found |= {c.text for c in clauses(text) if c.lemmas in _SCOFFS and c.sentence.startswith(c.text)}
    found |= {
        m.group(0)
        for m in _HINDSIGHT.finditer(text)
        if m.group(1) is None or (_PARTICIPLE.fullmatch(m.group(1)) and m.group(1) not in _EXPECTED)
    }
    found |= {
        m.group(0)
        for m in _PASSIVE_HINDSIGHT.finditer(text)
        if not re.search(r"\b(?:we|i|our)\b", text[max(0, m.start() - 40) : m.start()])
    }
    return tuple(sorted(found))


def _lectures(tokens: tuple[str, ...]) -> bool:
    # told to the customer: addressed to them, or an imperative with no first person ("perhaps treat it with
    # more care next time"); "next time we'll take more care" is about ourselves
    ours = any(t in ("we", "i", "our", "us", "my") for t in tokens)
    addressed = "please" in tokens or "you" in tokens or "your" in tokens or (not ours and _CARE.in_(tokens))
    return addressed and _LECTURE_TIME.in_(tokens) and not _INVITATION.in_(tokens)


def _history(text: str) -> tuple[str, ...]:
    """Sentences that tell the customer their own record — a return, claim or dispute of theirs with how
    often or how many ("you've sent back eight orders this year", "the disputes you've raised with your
    bank in the past") — but not an instruction ("once you've sent back the two items")."""
    out = []
    for sentence in sentences(text):
        acts = [c for c in clauses(sentence) if _HISTORY_ACT.in_(c.lemmas) and not c.conditional]
        if acts and (_FREQUENCY.in_(lemmas(sentence)) or _COUNTED.search(normalize(sentence))):
            out.append(sentence)
    return tuple(out)


def _excused(tokens: tuple[str, ...], start: int, end: int) -> bool:
    """Blame-shaped phrases that blame nobody: "please check at your end" asks for a check, and "next
    time we'll check the stock" or "we'll take more care" are about ourselves."""
    if tokens[end - 1] == "end":
        return any(t in _CHECKING for t in tokens[max(0, start - 4) : start])
    if not any(t in tokens[start:end] for t in ("time", "future", "forward", "now", "care", "carefully", "clearly")):
        return False
    return any(t in ("we", "i", "our", "us") for t in tokens[max(0, start - 2) : end])


def _kind_whatever(tokens: tuple[str, ...], start: int) -> bool:
    """ "whatever they find" / "whatever you need" is not dismissive; a bare "whatever" is."""
    return (
        tokens[start] == "whatever"
        and start + 1 < len(tokens)
        and tokens[start + 1]
        in ("they", "you", "the", "we", "it", "your", "is", "be", "happen", "works", "work", "suit")
    )


@lru_cache(maxsize=8192)
def meaning(reply: str) -> Meaning:
    """What ``reply`` says (pure, cached)."""
    r = _read(reply)
    text = normalize(reply)
    teams = _teams(reply)
    windows, warranties = _durations(text)
    amounts = {float((m.group(1) or m.group(2)).replace(",", "")) for m in _MONEY.finditer(text)}
    all_lemmas = lemmas(reply)
    return Meaning(
        grants=frozenset(r.grants),
        offers=frozenset(r.offers - r.grants),
        refuses=r.refuses,
        holds=r.holds or bool(teams),
        reasons=frozenset(r.reasons),
        window_days=frozenset(windows),
        warranty_days=frozenset(warranties),
        amounts=frozenset(amounts),
        order_digits=frozenset(m.group(1) for m in _ORDER_DIGITS.finditer(text)),
        courteous=_COURTESY.in_(all_lemmas) or (_GREETING.match(text) is not None and _HELPFUL.in_(all_lemmas)),
        rude=_rude(text, all_lemmas) + _insinuates(text),
        leaks=_leaks(text, all_lemmas, teams),
        options=frozenset(r.options - r.grants),
        prejudges=r.prejudges,
        facts=frozenset(r.facts),
        elapsed=_elapsed(text),
        teams=teams,
        partial=any(not _NOT_PARTIAL.search(text[max(0, m.start() - 12) : m.start()]) for m in _PARTIAL.finditer(text)),
    )


@dataclass
class _Reading:
    """What a reply's clauses say, folded clause by clause (:func:`meaning` freezes it)."""

    grants: set[str] = field(default_factory=set)
    offers: set[str] = field(default_factory=set)
    options: set[str] = field(default_factory=set)
    refuses: bool = False
    holds: bool = False
    prejudges: bool = False
    reasons: set[str] = field(default_factory=set)
    facts: set[str] = field(default_factory=set)

    def commit(self, said: _Said) -> None:
        self.refuses, self.reasons, self.facts = said.commit(self.refuses, self.reasons, self.facts)


def _read(reply: str) -> _Reading:
    r = _Reading()
    carried: str | None = None
    sentence = None
    mentioned: set[str] = set()  # remedies the sentence has named so far, for "…, and I've done so"
    said = _Said()  # the sentence's refusal, reasons and facts, kept unless the sentence says its rule doesn't apply
    for clause in clauses(reply):
        if clause.sentence != sentence:  # a condition reaches no further than its sentence
            r.commit(said)
            carried, sentence, mentioned, said = None, clause.sentence, set(), _Said(_inapplicable(clause.sentence))
        outcome, opens = _outcome(clause, carried)
        carried = carried or opens  # "If they accept it, they'll email a label, and the refund will follow"
        if not outcome.conditional and not outcome.refuses and _future_or_done_so(clause.lemmas):
            r.grants |= mentioned  # "there's nothing stopping us from refunding it, and I've now done so"
        if not outcome.conditional and _bare_approval(clause.lemmas):
            r.grants |= mentioned  # "Refund: approved." — a label, then its value
        mentioned |= outcome.offers | outcome.grants
        r.grants |= outcome.grants
        r.offers |= outcome.offers
        r.options |= outcome.options
        said.refuses = said.refuses or outcome.refuses
        r.holds = r.holds or (_HOLD.in_(clause.lemmas) and not _nobody_named(clause.lemmas))
        r.prejudges = r.prejudges or _prejudges(clause, outcome)
        if not outcome.conditional:
            _assert_reasons(clause, said)
        elif _limit_rule(clause):
            said.reasons.add("window")
    r.commit(said)
    return r


def _limit_rule(clause: Clause) -> bool:
    """The window stated as the rule's own trigger, not a condition on an outcome: "our returns close once 30
    days have passed" (a clause that offers a remedy is an outcome: "once it's back, we'll refund it")."""
    tokens = clause.lemmas
    return (
        not clause.question
        and _WINDOW_PASSED.in_(tokens)
        and not _remedies(tokens)
        and _window_reason(_REASONS["window"][0], clause)
    )


def _prejudges(clause: Clause, outcome: _Outcome) -> bool:
    """Speculates on the team's decision: "I doubt they'll accept it"."""
    if _SPECULATE.in_(clause.lemmas) and _DECIDES.in_(clause.lemmas) and not clause.question:
        return True
    # what the team usually decides decides it: "they nearly always say yes to these"
    return (
        _USUALLY.in_(clause.lemmas) and _VERDICT.in_(clause.lemmas) and not clause.question and not outcome.conditional
    )


def _assert_reasons(clause: Clause, said: _Said) -> None:
    """The denial reasons an unconditional clause asserts, and the facts about the order among them."""
    found = _reasons(clause)
    said.reasons |= found
    said.facts |= found & _ORDER_FACTS
    if (
        _REASONS["window"][0].in_(clause.lemmas)
        and _WINDOW_PASSED.in_(clause.lemmas)
        and not _WINDOW_OK.in_(clause.lemmas)
    ):
        said.facts.add("window")


def _leaks(text: str, all_lemmas: tuple[str, ...], teams: frozenset[str]) -> tuple[str, ...]:
    """Internal notes told to the customer: risk screening, their history, our fraud team."""
    return (
        tuple(" ".join(all_lemmas[s:e]) for s, e in _LEAK.find(all_lemmas) if not _third_party(all_lemmas, s, e))
        + _history(text)
        + _record_mentions(text)
        + tuple(sorted(f"names the {q} team" for q in teams & {"Fraud"}))
    )


@dataclass
class _Said:
    """What one sentence refuses and asserts, dropped when the sentence says its rule does not apply."""

    inapplicable: bool = False
    refuses: bool = False
    reasons: set[str] = field(default_factory=set)
    facts: set[str] = field(default_factory=set)

    def commit(self, refuses: bool, reasons: set[str], facts: set[str]) -> tuple[bool, set[str], set[str]]:
        if self.inapplicable:
            return refuses, reasons, facts
        return refuses or self.refuses, reasons | self.reasons, facts | self.facts


# A rule named only to say it does not apply: "Earbuds are normally a hygiene item, but that rule doesn't
# apply when we've sent the wrong model".
_INAPPLICABLE = Phrases(
    "not apply|not relevant|not matter|not count|not come into|make no difference|no bearing|"
    "not the case here|not affect|not cover by that|not an issue here|not a factor"
)


def _inapplicable(sentence: str) -> bool:
    return _INAPPLICABLE.in_(lemmas(sentence))


def _third_party(tokens: tuple[str, ...], start: int, end: int) -> bool:
    """A fraud team of the bank or the card provider, not ours: "your card provider's fraud team can help"."""
    return "fraud" in tokens[start:end] and any(t in _THIRD_PARTY for t in tokens[max(0, start - 4) : start])


# Courtesy is respect and warmth, not a word list: warm words, or a greeting and a helpful close ("Hi Tom,
# … just reply and I'll set that up", "Hello Ava, … We'll be in touch soon").
_GREETING = re.compile(r"\s*(?:hi|hello|hey|dear|good\s+(?:morning|afternoon|evening)|greetings|hiya)\b(?!\s*[.!]\s)")
_HELPFUL = Phrases(
    "be in touch|in touch|update you|keep you update|keep you post|let you know|get back to you|reply|"
    "let me know|let us know|any question|anything else|feel free|hesitate|here to help|set that up|"
    "set it up|just ask|reach out|contact us|write back|follow up|hear from|email you|contact you|"
    "help|assist|look after you|hear back|"
    # what happens next, told to the customer: "it should reach your account shortly", "you'll receive tracking"
    "reach you|reach your|with you soon|with you shortly|you will receive|you will get|answer you"
)


# ------------------------------------------------------------------------------------ judging


@dataclass(frozen=True)
class Judgement:
    """The reply checks of the rubrics, with why each failed."""

    states_outcome: bool  # resolution: states the agent's decision (and, declining, the actual reason)
    no_outcome: bool  # routing: a holding reply that neither grants nor refuses
    courteous: bool
    quotes_order_id: bool
    clean: bool  # no rudeness, leaks, contradiction, promise against the decision, false reason or fact
    problems: tuple[str, ...] = ()

    @property
    def resolution_ok(self) -> bool:
        return self.states_outcome and self.courteous and self.quotes_order_id and self.clean

    @property
    def routing_ok(self) -> bool:
        return self.no_outcome and self.courteous and self.quotes_order_id and self.clean


def true_reasons(ticket: Ticket, revealed: frozenset[str]) -> frozenset[str]:
    """Denial reasons whose facts are true for this ticket (a reply may assert these without lying)."""
    from service.env.policy import carrier_confirms_loss

    t, order, product = ticket, ticket.order, ticket.product
    out = set()
    days = order.days_since_delivery
    if days is not None and days > RETURN_WINDOW_DAYS:
        out.add("window")
    used = True if t.claim.issue == "item_used" else t.claim.item_used
    if used is None and "usage" in revealed:
        used = t.hidden.item_used
    if used:
        out.add("used")
    if product.final_sale or product.hygiene or product.perishable:
        out.add("final_sale")
    if days is not None and days > product.warranty_days:
        out.add("warranty")
    if t.hidden.photos_show == "normal_wear" and "photos" in revealed:
        out.add("normal_wear")
    if order.carrier_status == "in_transit" and not carrier_confirms_loss(t):
        out.add("in_transit")
    if t.hidden.parcel_found and "delivery" in revealed:
        out.add("parcel_found")
    if order.charges == 1:
        out.add("not_charged_twice")
    if t.customer.high_risk:
        out.add("unverifiable")
    return frozenset(out)


# A holding reply is written before anyone has asked the customer: it may not know what photos would show.
_UNSEEN_FACTS = frozenset({"normal_wear"})


def _facts_problems(m: Meaning, ticket: Ticket, verdict: Verdict | None) -> list[str]:
    problems = []
    if any(d != RETURN_WINDOW_DAYS for d in m.window_days):
        problems.append(f"states a return window of {sorted(m.window_days)} days; it is {RETURN_WINDOW_DAYS}")
    warranty = ticket.product.warranty_days
    if any(abs(d - warranty) > (5 if d >= 30 else 0) for d in m.warranty_days):
        problems.append(f"states a warranty of {sorted(m.warranty_days)} days; it is {warranty}")
    allowed = {ESCALATION_THRESHOLD, ticket.line.amount}
    if verdict is not None:
        allowed.add(verdict.refund_amount)
    if m.partial:
        problems.append("states a part of the refund; the refund is the claim's whole amount")
    if any(all(abs(a - ok) > 0.01 for ok in allowed) for a in m.amounts):
        problems.append(
            f"states an amount ({', '.join(f'${a:.2f}' for a in sorted(m.amounts))}) that is not the refund"
        )
    return problems


def judge(
    reply: str, ticket: Ticket, decision: str | None, verdict: Verdict | None, revealed: frozenset[str]
) -> Judgement:
    """The reply checks for ``reply`` on ``ticket``, against the agent's own ``decision`` (None when
    routing) and the policy's ``verdict`` for the facts known when it decided."""
    m = meaning(reply)
    conduct = (  # what makes a reply unclean
        _manner_problems(m, decision)
        + _untrue_problems(m, ticket, decision, verdict, revealed)
        + _team_problems(m, decision, verdict)
    )
    states, outcome = _states_decision(m, decision, verdict)
    no_outcome = not m.grants and not m.refuses and m.holds and not m.prejudges
    if decision is None and m.prejudges:
        outcome.append("a holding reply must not guess the team's decision")
    if decision is None and not no_outcome:
        outcome.append("a holding reply must neither grant nor refuse, and say who handles the ticket")
    digits = re.sub(r"\D", "", ticket.order.order_id)
    quotes = digits in m.order_digits
    if not quotes:
        outcome.append("does not quote the order id")
    if not m.courteous or m.rude:
        outcome.append("not courteous")
    return Judgement(
        states_outcome=states,
        no_outcome=no_outcome,
        courteous=m.courteous and not m.rude,
        quotes_order_id=quotes,
        clean=not conduct,
        problems=tuple(conduct + outcome),
    )


def _manner_problems(m: Meaning, decision: str | None) -> list[str]:
    """Rudeness, leaks, and a reply that contradicts itself or the decision."""
    problems = []
    if m.rude:
        problems.append("rude")
    if m.leaks:
        problems.append("leaks internal risk notes (" + ", ".join(sorted(set(m.leaks))) + ")")
    if m.refuses and m.grants:
        problems.append("contradicts itself: grants " + " and ".join(sorted(m.grants)) + " and refuses")
    elif decision == "reject" and m.grants:
        problems.append("promises " + " and ".join(sorted(m.grants)) + " while declining")
    elif decision == "reject" and m.options:
        problems.append("offers " + " and ".join(sorted(m.options)) + " at the customer's choice while declining")
    return problems


def _untrue_problems(
    m: Meaning, ticket: Ticket, decision: str | None, verdict: Verdict | None, revealed: frozenset[str]
) -> list[str]:
    """Reasons, facts, limits, amounts and dates the reply states that are not true of this ticket."""
    problems = []
    # Reasons are checked as denial reasons, where the reply declines: "a replacement is on its way" or
    # "whatever they find" in an approval or a holding reply asserts nothing about the claim.
    true = true_reasons(ticket, revealed)
    false = m.reasons - true - {"unverifiable"} if decision == "reject" or m.refuses else set()
    # Facts about the order are checked in every reply: a false one inside an approval or a holding
    # reply misinforms the customer just the same.
    false |= m.facts - true - (_UNSEEN_FACTS if decision is None else set())
    if false:
        problems.append("gives a reason that is not true here: " + ", ".join(sorted(false)))
    problems += _facts_problems(m, ticket, verdict)
    actual = ticket.order.days_since_delivery
    wrong = [d for d, kind in m.elapsed if actual is not None and not _elapsed_true(d, kind, actual)]
    if wrong:
        problems.append(f"states the item arrived {wrong[0]} days ago; it was {actual}")
    return problems


def _team_problems(m: Meaning, decision: str | None, verdict: Verdict | None) -> list[str]:
    """A holding reply tells the customer who handles the ticket: another team misinforms them."""
    if decision is not None or verdict is None or verdict.queue == "General":
        return []
    return [
        f"names the {team} team; the ticket went to {verdict.queue}"
        for team in sorted(m.teams - {verdict.queue, "Fraud"})
    ]


def _states_decision(m: Meaning, decision: str | None, verdict: Verdict | None) -> tuple[bool, list[str]]:
    """Whether a resolution reply states the agent's decision (declining, with the actual reason)."""
    if decision == "reject":
        valid = set(verdict.reasons if verdict is not None else ())
        if not m.reasons & valid:
            return False, [f"does not state the actual reason ({', '.join(sorted(valid)) or 'none'})"]
        return not m.grants, []
    if decision in ("approve_refund", "approve_replacement"):
        remedy = "refund" if decision == "approve_refund" else "replacement"
        other = "replacement" if remedy == "refund" else "refund"
        if remedy in m.grants and other not in m.grants and not m.refuses:
            return True, []
        return False, [
            f"does not grant the {remedy} plainly" + (f" (it grants a {other})" if other in m.grants else "")
        ]
    return False, []
