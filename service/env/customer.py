"""The scripted customer: understands what it is asked and answers from the hidden facts.

Understanding is nearest-neighbour text matching, not a keyword list. The agent's message is first
read for its requests: a sentence asks something when it is a question, addresses the reader ("could
you"), gives an asking or sending imperative ("send", "let me know") or states a need ("I'll need").
Each request sentence is split where it joins several requests ("and", "also", a comma) or adds a
condition ("if it turns up"). A clause that only sets the scene is dropped: "since it arrived", "now
that it has turned up", "you mentioned it is unused", "thanks for the photos", "I'll take it from
there". A fragment keeps the request it belongs to: "photograph the label and the fault" photographs
the fault, and "a photo of the receipt and of the damage" asks for a photo of the damage.

Every request part is then compared with example requests for each topic (photos, usage, delivery,
details) and with examples of requests that ask for none of them (an address, a refund, a
replacement's delivery). The comparison uses TF-IDF vectors of lemmas and lemma pairs; a misspelt
word is read as the example word it is closest to. A term weighs by how much it tells which class
a request belongs to: one minus the entropy of the classes whose examples use it. "photo" weighs a
lot and "problem" little. Words in an "of" complement weigh half: in "a video of it not working" the
video is what is asked (a quantity's "of" opens no complement: "a couple of photos"). A topic is
asked when its closest example is close enough and closer than the closest "none" example.
``tests/env/corpus/questions*.jsonl`` are human-written questions with their topics: the README reports
this reader's accuracy on them.

The customer answers every asked topic it has hidden facts for, and only those: each answer states
the one fact asked, and a topic it has nothing hidden about gets a reply that points at its first
message and says nothing of the claim (never the claim restated as the message's template text, so a
question cannot stand in for reading the message). Any fact it states counts as known for grading,
whatever question revealed it. It stays deterministic: the answer's wording is seeded by the ticket,
the round and the topics asked.
"""

from __future__ import annotations

import math
import random
import re
from collections import Counter
from functools import lru_cache
from itertools import pairwise

import simplemma
from rapidfuzz import fuzz, process

from service.env import messages
from service.env.generator import stable_seed
from service.env.language import lemma, lemmas, normalize, sentences, words
from service.env.world import Ticket

TOPICS = ("photos", "usage", "delivery", "details")

_EXAMPLES: dict[str, tuple[str, ...]] = {
    "photos": (
        "could you send photos of the damage",
        "please attach a picture showing the problem",
        "can you share an image of it",
        "send us some pictures",
        "a photo of the fault would help",
        "please upload photos",
        "do you have any pictures",
        "could you take a picture of the item",
        "we need photo evidence",
        "please provide images of the defect",
        "send a photo showing the crack",
        "can I see a picture",
        "attach pics of the damage",
        "a quick snapshot would help",
        "could you record a short video showing the fault",
        "share a photo so we can see the issue",
        "please send photographs of the item",
        "could you email us some images",
        "photos of the packaging and the item",
        "show us what it looks like",
        "evidence of the damage such as a photo",
        "can I see the damage",
        "I need to see it",
        "a snap of the damage",
        "film a short clip of it",
        "a screenshot of the error",
        "photos please",
        "could you photograph the damaged part",
        "send an image of the item you received",
        "let me see the marks",
    ),
    "usage": (
        "has the item been used",
        "have you used it",
        "was it worn",
        "has it been washed",
        "is it still unused",
        "are the tags still on",
        "is it in the original packaging",
        "has it been opened",
        "did you try it",
        "what condition is it in",
        "is it still brand new in the box",
        "has it been worn or washed",
        "is it unopened",
        "is the item still sealed",
        "have you worn it at all",
        "is it in new condition",
        "did you use it before the problem",
        "has the seal been opened",
        "is everything still in the box",
        "was it tried on",
        "how much has it been used",
        "is it in resalable condition",
        "has it been slept on or sat on",
        "has it been taken out of the packaging",
        "is the item unworn",
        "has it been assembled or installed",
        "is it in the same state as it arrived",
        "has it been put through the wash",
        "is the wrapping still on",
        "are the labels still attached",
        "has the shirt been washed",
        "have you used it yet",
        "has it been switched on",
        "was it used before it broke",
    ),
    "delivery": (
        "has the parcel turned up",
        "could you check with your neighbours",
        "did it show up since",
        "please check the porch",
        "has it arrived since",
        "could it have been left somewhere",
        "check the parcel locker",
        "ask at reception",
        "did anyone sign for it",
        "has it turned up since",
        "could you look around the delivery spot",
        "check with the building reception or mailroom",
        "is it possible a neighbour took it in",
        "look in your safe place",
        "has the package been found",
        "did the courier leave it with someone",
        "check behind the bins or by the door",
        "have you found the parcel",
        "please confirm whether the parcel is still missing",
        "did you receive a delivery card",
        "any sign of the package",
        "check your mailbox",
        "ask the concierge if they are holding it",
        "left in the post room",
        "have you been able to locate it",
        "is it with a neighbour",
        "check the doorstep",
        "have you received it",
        "have you tracked it down",
        "was it left at the door",
        "did the driver leave it somewhere",
        "is it still missing",
        "did someone in your household take the parcel in",
        "did the package arrive after all",
        "did anyone at home receive the parcel",
        # "reach" as a parcel arriving, not as contacting the customer
        "has the parcel reached you",
    ),
    "details": (
        "could you tell me more",
        "what exactly is the problem",
        "please describe what happened",
        "what is wrong with it",
        "can you explain the issue",
        "could you give me more details",
        "what kind of problem is it",
        "what happened to the item",
        "please clarify the issue",
        "which item is affected",
        "can you be more specific",
        "what seems to be the problem",
        "tell me what went wrong",
        "describe the fault",
        "what issue are you having",
        "how would you describe the damage",
        "what do you mean exactly",
        "when did you notice the problem and what happened",
        "could you elaborate",
        "what is the issue with your order",
        "what is not working",
        "in what way is it faulty",
        "which part is faulty",
        "what are you seeing",
        "which part is broken",
        "what is the defect",
        "does it not turn on or is it damaged",
        "what is the problem with the order",
        "a short description of the issue",
        "which item is damaged",
        "which items are missing",
        "is there more you can tell me",
        "what is the matter with it",
        "what happens when you use it",
        "is the problem with one part or the whole thing",
        "which of the items is faulty",
        "give me more information",
        "what is the fault",
        "what is up with it",
        "what did you notice",
        "how is it behaving",
    ),
}
_NONE_EXAMPLES = (
    "did you use the correct address at checkout",
    "is the delivery address still correct",
    "what is your phone number",
    "which refund method would you prefer",
    "thank you for your patience",
    "what is your address",
    "have you used our returns portal",
    "which photo format do you prefer",
    "thanks for getting in touch",
    "do you want a refund or a replacement",
    "what is your order number",
    "could you confirm your email",
    "sorry for the trouble",
    "can you tell me which refund method you want",
    "has the refund arrived in your account",
    "safe place for future deliveries",
    "would you like us to send it to the same address",
    "photo of the receipt",
    "a picture of the return label",
    "how would you like us to resolve this",
    "please print the return label",
    "what email address did you use",
    "which payment method did you use",
    "did you use a discount code",
    "did you pay by card",
    "what is your postcode",
    "can I help with anything else",
    "did you receive our email",
    "has the refund reached your account",
    "would you like it in new packaging",
    "which card did you pay with",
    "has the refund come through",
    "can we leave the replacement with a neighbour",
    "when should the courier collect the return",
    "is this your first order with us",
    "where should we deliver the replacement",
    "when would you like it delivered",
    "could you confirm your name for our records",
    "what would you like us to do next",
    "have you shopped with us through the app",
    "is our website working for you",
    "did the online chat help",
    "when can we phone you",
    "which number is best to reach you on",
    "is now a good time to talk",
)
# What makes a sentence a request rather than a statement: a question mark, a modal addressed to the
# reader ("could you"), "please" before anything but an instruction ("please keep…", "please don't…"), an
# imperative of asking or sending, or a stated need ("I'll need", "it would help").
_REQUEST = re.compile(
    r"\?|\b(?:could|can|would|will|may|might)\s+(?:you|u)\b|\b(?:can|could|may)\s+(?:i|we)\s+(?:see|have|get|ask)\b|"
    r"\b(?:please|pls|plz|kindly)\b(?!\s+(?:do\s+not|never|keep|remember|note|make\s+sure|ensure|allow|wait|bear|hold|"
    r"use\s+(?:the|this|that|our|it|these|those)\b))|"
    r"(?:^|[,;:]\s*|\b(?:and|also|then)\s+)(?:let\s+(?:me|us)\s+know|tell\s+(?:me|us)|send|share|attach|upload|confirm|check|"
    r"double-check|describe|explain|clarify|elaborate|look|ask|provide|show|record|snap|take|email|give\s+(?:me|us)|walk\s+me|"
    r"include|photograph|film)\b|"
    r"\b(?:i|we)\s+(?:will\s+|would\s+|shall\s+)?(?:need|require)\b|\b(?:i|we)\s+would\s+(?:like|appreciate|love\s+to\s+(?:see|know|hear))\b|"
    r"\b(?:it|that|this)\s+would\s+(?:really\s+)?help\b|\bwould\s+(?:really\s+)?(?:help|be\s+(?:great|useful|helpful|ideal|fine))|"
    r"\bany\s+chance\b|\bhelp\s+us\b"
)
# A part that asks by itself (a question form or a request marker); any other fragment continues the
# request before it.
_OWN = re.compile(
    r"^(?:is|are|was|were|has|have|had|do|does|did|can|could|will|would|should|may|might|what|which|how|when|where|who|why|"
    r"whether|if|any|still)\b|" + _REQUEST.pattern.replace(r"\?|", "", 1)
)
_PARTS = re.compile(r"\b(?:and also|and|also|plus|as well as|additionally|then)\b|[,;+&]|\s[-—–]\s")
# A condition inside a request ("send a picture of the box if it turns up damaged") is a part of its
# own; "if" after a verb of knowing ("let me know if") is the request itself.
_CONDITION = re.compile(
    r"(?<!\bknow)(?<!\btell me)(?<!\btell us)(?<!\bask)(?<!\bsee)(?<!\bcheck)(?<!\bconfirm)(?<!\bwonder)\s+(?=\bif\b)"
)
# What only sets the scene, never a request: a clause that presupposes ("since it arrived", "now that
# the parcel has turned up", "before I can go further"), reported words ("you mentioned it is
# unused"), thanks for something done, and the agent's own statements ("I'll take it from there").
# ("if" clauses are not here: "if it has turned up, is it unopened?" does ask whether it turned up.)
_CONTEXT = re.compile(
    r"\b(?:since|now\s+that|because|as\s+soon\s+as|before|after|until|till|as)\s+"
    r"(?:it|you|i|we|they|he|she|that|this|the|your|our|my|its|someone|anyone)\b.*$|"
    r"\b(?:you|they)\s+(?:mentioned|said|told|wrote|explained|noted|stated|reported)\b.*$|"
    r"^(?:thanks|thank\s+you|many\s+thanks)\s+(?:so\s+much\s+|very\s+much\s+)?for\b.*$|"
    r"^(?:just\s+)?(?:to\s+)?(?:check|checking|confirm|clarify|be\s+sure|make\s+sure|double-check)$|^quick\s+question$|"
    r"^(?:i|we)\s+(?:will|shall|am|are|have|can|could|would)\b(?!.*\b(?:need|require|like|appreciate|love|want|ask)\b).*$"
)
# A fragment that only modifies the request before it ("…, with the label in shot", "…, including the box").
_MODIFIER = re.compile(
    r"^(?:with|without|including|in|on|at|of|from|for|showing|like|such\s+as|especially|ideally|preferably|where)\b"
)
# The word lists below are kept as compact rows, not one word per line.
# fmt: off
# "a couple of photos" is photos: "of" after a quantity does not open a complement.
_QUANTITY = frozenset(
    [
        "couple", "few", "bit", "lot", "lots", "pair", "set", "number", "some", "any", "both", "all", "one", "each",
        "none", "most"
    ]
)
# Words that frame a request rather than say what it is about (and negation, which does not change
# what is asked: "hasn't been used" asks about use).
_STOP = frozenset(
    [
        "a", "an", "the", "to", "of", "for", "you", "your", "it", "its", "we", "us", "our", "me", "my", "i", "is",
        "be", "are", "was", "were", "do", "does", "did", "have", "has", "had", "can", "could", "would", "will",
        "please", "and", "or", "in", "on", "at", "by", "with", "that", "this", "there", "if", "any", "some", "just",
        "so", "as", "from", "about", "confirm", "whether", "let", "know", "tell", "need", "help", "quick", "like",
        "mind", "able", "chance", "get", "got", "make", "kindly", "also", "really", "still", "yet", "since", "item",
        "order", "one", "u", "pls", "plz", "possible", "possibly", "happy", "not", "no", "never", "out"
    ]
)
# fmt: on
# Concepts: words that mean the same thing *for what is asked* share a feature, so a synonym no example
# uses ("shots", "visual proof", "laundered", "the wrong door") still lands near the examples of its
# topic. A concept is a feature like any word, weighed by how well it tells the classes apart.
_CONCEPTS: dict[str, tuple[str, ...]] = {
    "PHOTO": (
        "photo",
        "photograph",
        "picture",
        "pic",
        "pics",
        "image",
        "snap",
        "snapshot",
        "shot",
        "video",
        "clip",
        "footage",
        "visual",
        "screenshot",
        "selfie",
        "film",
        "camera",
        "photographic",
        "imagery",
        "close-up",
        "closeup",
        "view",
    ),
    "USE": (
        "use",
        "wear",
        "wash",
        "launder",
        "try",
        "run",
        "plug",
        "switch",
        "unbox",
        "assemble",
        "install",
        "ride",
        "drive",
        "cook",
        "sleep",
        "jog",
        "walk",
        "test",
        "operate",
        "condition",
        "unused",
        "unworn",
        "unopened",
        "unwashed",
        "seal",
        "sealed",
        "tag",
        "packaging",
        "wrapping",
        "untouched",
        "pristine",
        "mint",
        "resalable",
        "worn",
        "washed",
        "used",
        "open",
        "rain",
        "outdoors",
        "outside",
        "unwrap",
        "unpack",
        "unseal",
        "cellophane",
        "wrapper",
        "shrinkwrap",
        "indoors",
    ),
    "PLACE": (
        "door",
        "porch",
        "doorstep",
        "neighbour",
        "neighbor",
        "reception",
        "mailroom",
        "locker",
        "shed",
        "garage",
        "gate",
        "bin",
        "garden",
        "concierge",
        "letterbox",
        "mailbox",
        "postbox",
        "doormat",
        "hallway",
        "lobby",
        "step",
        "address",
        "house",
        "flat",
        "building",
        "entrance",
        "yard",
        "porter",
        "desk",
        "front",
    ),
    "ARRIVE": ("arrive", "find", "locate", "appear", "surface", "deliver", "delivery"),
    "DOC": (
        "receipt",
        "invoice",
        "statement",
        "transaction",
        "slip",
        "note",
        "document",
        "barcode",
        "bank",
        "proof of purchase",
        "payment",
        "refund",
        "voucher",
        "card",
        "account",
        "email",
        "format",
        "pay",
        "paypal",
        "credit",
        "gift",
        "jpeg",
        "pdf",
    ),
    "PREFER": ("prefer", "rather", "instead", "choose", "colour", "color", "option", "preference", "alternative"),
    # our own services and how we reach the customer: "have you used our live chat", "a good time to call you"
    "SERVICE": (
        "app",
        "chat",
        "webchat",
        "website",
        "site",
        "portal",
        "helpline",
        "hotline",
        "online",
        "service",
        "live",
    ),
    "CONTACT": ("call", "ring", "phone", "text", "reach", "contact", "number", "callback", "sms", "whatsapp"),
}
_CONCEPT_OF = {w: c for c, ws in _CONCEPTS.items() for w in ws}
THRESHOLD = 0.32
COMPLEMENT = 0.5  # the weight of words in an "of" complement: "a photo of [the wrong item you received]"
FLOOR = 0.05  # the weight of a term no example uses


def _concept(token: str) -> str | None:
    return _CONCEPT_OF.get(token)


# Phrasal verbs read as one word, so their particle-less verb keeps its own meaning: "show up" is a parcel
# appearing, "show me the damage" a picture.
_PHRASAL = {
    ("show", "up"): "appear",
    ("turn", "up"): "appear",
    ("pop", "up"): "appear",
    ("track", "down"): "locate",
    ("hand", "in"): "deliver",
    ("drop", "off"): "deliver",
    ("close", "up"): "closeup",
    # someone took the parcel in, the customer asking around: a neighbour
    ("take", "it", "in"): "neighbour",
    ("take", "in"): "neighbour",
    ("ask", "around"): "neighbour",
    ("be", "it", "do"): "behave",
    ("do", "it", "do"): "behave",
    ("take", "delivery", "of"): "sign",
    # idioms of a missing parcel: "still nowhere to be seen" sees nothing
    ("nowhere", "to", "be", "see"): "missing",
    ("nowhere", "to", "be", "find"): "missing",
    ("no", "sign", "of"): "missing",
}
_PHRASAL_LENGTHS = sorted({len(k) for k in _PHRASAL}, reverse=True)


def _phrasal(tokens: tuple[str, ...]) -> list[str]:
    out: list[str] = []
    i = 0
    while i < len(tokens):
        for n in _PHRASAL_LENGTHS:
            merged = _PHRASAL.get(tuple(tokens[i : i + n]))
            if merged:
                out.append(merged)
                i += n
                break
        else:
            out.append(tokens[i])
            i += 1
    return out


# Nouns that qualify the next one: "a photo of the [packing] slip", "of your [bank] statement".
_ATTRIBUTIVE = frozenset(
    {
        "pack",
        "packing",
        "order",
        "return",
        "shipping",
        "delivery",
        "postage",
        "bank",
        "card",
        "payment",
        "gift",
        "purchase",
    }
)
_NOUN_PHRASE = re.compile(r"^(?:the|a|an|your|its|any|some|this|that|those|these)\b")


def _photographs_a_document(part: str) -> bool:
    """A picture of a receipt, a label or a statement is no evidence about the item: "could you send a
    photo of your receipt?" asks for none of the topics."""
    tokens = _phrasal(lemmas(part))
    for i, t in enumerate(tokens):
        if _concept(_spelled(t)) == "PHOTO" and "of" in tokens[i + 1 : i + 3]:
            rest = [w for w in tokens[tokens.index("of", i) + 1 :] if w not in _STOP]
            head = rest[1] if len(rest) > 1 and rest[0] in _ATTRIBUTIVE else rest[0] if rest else ""
            return _concept(head) == "DOC"
    return False


def _labelled() -> list[tuple[str, str]]:
    return [(topic, ex) for topic, exs in _EXAMPLES.items() for ex in exs] + [("none", ex) for ex in _NONE_EXAMPLES]


@lru_cache(maxsize=1)
def _vocabulary() -> dict[str, str]:
    """Every content word the examples use, as written and as its lemma, mapped to the lemma."""
    out: dict[str, str] = {}
    for _, ex in _labelled():
        for w in words(normalize(ex)):
            lem = lemma(w)
            if lem in _STOP or len(lem) < 4:
                continue
            out.setdefault(w, lem)
            out.setdefault(lem, lem)
    return out


def _gerund(token: str) -> str:
    """ "finding" is "find" (the dictionary reads it as a noun): a gerund read as the example verb it is."""
    vocab = _vocabulary()
    if token.endswith("ing") and len(token) > 5 and token not in vocab:
        stem = token[:-3]
        for verb in (stem, stem + "e", stem[:-1]):
            if verb in vocab:
                return vocab[verb]
    return token


@lru_cache(maxsize=8192)
def _spelled(token: str) -> str:
    """A misspelt word ("pictrue", "nieghbours", "lables") read as the example word it is closest to.
    A real word is never "corrected" ("serial" is not "seal")."""
    vocab = _vocabulary()
    token = _gerund(token)
    if len(token) < 5 or token in vocab or not token.isalpha() or simplemma.is_known(token, lang="en"):
        return vocab.get(token, token)
    match = process.extractOne(token, tuple(vocab), scorer=fuzz.ratio, score_cutoff=80)
    return vocab[match[0]] if match else token


@lru_cache(maxsize=8192)
def _features(text: str) -> dict[str, float]:
    """Lemmas and lemma pairs, those in an "of" complement at half weight."""
    toks: list[tuple[str, float]] = []
    scale, previous = 1.0, ""
    for t in _phrasal(lemmas(text)):
        if t == "of" and previous not in _QUANTITY:
            scale = COMPLEMENT
        previous = t
        if t in _STOP or (t := _spelled(t)) in _STOP:
            continue
        toks.append((t, scale))
    # Using one of our services, a card or a credit is no use of the item: "have you tried our live chat?",
    # "would you like to use store credit?" — the verb of use goes.
    if any(_concept(t) in ("SERVICE", "DOC") for t, _ in toks):
        toks = [(t, s) for t, s in toks if t not in _USE_VERBS]
    feats: dict[str, float] = {}  # weights are fractional (COMPLEMENT): a Counter's are ints

    def add(term: str, weight: float) -> None:
        feats[term] = feats.get(term, 0) + weight

    for t, s in toks:
        add(t, s)
        if (c := _concept(t)) is not None:
            add(c, s)
    for (a, sa), (b, sb) in pairwise(toks):
        add(f"{a} {b}", min(sa, sb))
        ca, cb = _concept(a), _concept(b)
        if ca is not None or cb is not None:
            add(f"{ca or a} {cb or b}", min(sa, sb))
    return feats


_USE_VERBS = frozenset({"use", "try", "test", "operate", "open"})


@lru_cache(maxsize=1)
def _index() -> tuple[dict[str, float], list[tuple[str, dict[str, float]]]]:
    """Term weights and each example's normalised weighted vector.

    A term weighs by how much it tells which class a request belongs to: one minus the normalised
    entropy of the classes (the four topics and "none") whose examples use it. "photo" belongs to the
    photos examples but a few "none" examples borrow it, so it weighs a lot but not fully. "problem"
    appears in nearly every class, so it weighs little."""
    classes = (*TOPICS, "none")
    docs = [(topic, _features(ex)) for topic, ex in _labelled()]
    df: dict[str, Counter[str]] = {}
    for topic, feats in docs:
        for term in feats:
            df.setdefault(term, Counter())[topic] += 1
    weight = {}
    for term, counts in df.items():
        n = sum(counts.values())
        entropy = -sum(c / n * math.log(c / n) for c in counts.values())
        weight[term] = 1.0 - entropy / math.log(len(classes)) + FLOOR
    return weight, [(topic, _vector(feats, weight)) for topic, feats in docs]


def _vector(feats: dict[str, float], weight: dict[str, float]) -> dict[str, float]:
    vec = {t: c * weight.get(t, FLOOR) for t, c in feats.items()}
    norm = math.sqrt(sum(v * v for v in vec.values())) or 1.0
    return {t: v / norm for t, v in vec.items()}


def _closest(text: str) -> dict[str, float]:
    """The best similarity of ``text`` to each topic's examples (and to the "none" examples)."""
    weight, examples = _index()
    vec = _vector(_features(text), weight)
    best: dict[str, float] = {}
    for topic, example in examples:
        score = sum(v * example.get(t, 0.0) for t, v in vec.items())
        if score > best.get(topic, 0.0):
            best[topic] = score
    return best


def _frame(part: str, piece: str = "") -> str:
    """A request's frame: its words up to its first content word ("could you send", "please describe"),
    or up to its "of" when it asks for a picture *of* things ("a clear picture of [the label] and [the
    damaged area]": the second thing, a noun phrase, is pictured too)."""
    cut = part.rfind(" of ")
    if cut > 0 and _NOUN_PHRASE.match(piece) and any(_concept(_spelled(t)) == "PHOTO" for t in lemmas(part[:cut])):
        return part[: cut + 3]
    ws = part.split()
    for i, w in enumerate(ws):
        if any(t not in _STOP for t in lemmas(w)):
            return " ".join(ws[: i + 1])
    return part


_TRIM = " .?!:-—–"
# Frames and idioms read as what they ask, before the sentence is split: "out and about" is wearing it
# outdoors (its "and" joins no requests), "still as it arrived" is its condition, "what did you find"
# asks for a description, "what is it doing" for the fault.
_REWRITES = (
    (re.compile(r"\bout\s+and\s+about\b"), "outdoors"),
    (re.compile(r"\bclose[- ]?ups?\b"), "closeup"),
    (
        re.compile(
            r"\b(?:(?:in\s+)?the\s+same\s+(?:state|condition|shape|way)|still|exactly|just|condition|state)\s+"
            r"(?:as|how|like)\s+(?:it\s+was\s+|they\s+were\s+)?(?:when\s+)?(?:it|they|you)\s+(?:first\s+)?"
            r"(?:\w+\s+){0,2}?(?:arrived|delivered|came|got\s+(?:it|them)|received\s+(?:it|them)|turned\s+up)\b"
        ),
        "in original condition",
    ),
    (
        re.compile(
            r"\bwhat\s+(?:did|do|have|had)\s+you\s+(?:find|found|see|seen|notice|noticed|spot|spotted|discover|discovered)\b"
        ),
        "what did you notice",
    ),
    # wanting to see what the customer sees is a picture: "I'd like to see what you're seeing"
    (
        re.compile(
            r"\b(?:(?:i|we)\s+(?:would|will)?\s*(?:like|love|want|need)\s+to|let\s+(?:me|us))\s+see\b"
            r"(?:\s+what\s+you\s+(?:are|have\s+been|can)\s+(?:seeing|see|looking\s+at|describing|talking\s+about))?"
        ),
        "view it",
    ),
    # a film that protects, a card the courier leaves, a fault that shows itself: no picture in any of them
    (
        re.compile(
            r"\b(?:protective|plastic|cling|clear|screen|shrink)\s+film\b|\bfilm\b(?=\s+(?:is\s+|still\s+)+on\b)"
        ),
        "wrapping",
    ),
    (re.compile(r"\b(?:courier|calling|missed[- ]delivery|postman's|postie's|carrier)\s+card\b"), "delivery card"),
    (re.compile(r"\bshows?\s+itself\b|\bmanifests?(?:\s+itself)?\b"), "behave"),
    # small talk about the customer's day asks for nothing: "how's your weekend been so far?"
    (
        re.compile(
            r"\bhow(?:'s|\s+is|\s+was|\s+has)\s+(?:your|the)\s+(?:day|week|weekend|morning|afternoon|evening|holiday)"
            r"(?:\s+(?:going|gone|been|treating\s+you|so\s+far))*\b"
        ),
        "",
    ),
    # a side, not a parcel left somewhere: "is it the left or the right earbud"
    (re.compile(r"\b(the|your|its)\s+left\b(?!\s+(?:it|them|at|by|with|outside|in|on))"), r"\1 lefthand"),
)
# An offer asks the customer for nothing: "would you like us to email you a photo of the replacement?"
_OFFER = re.compile(
    r"^(?:shall|should)\s+(?:we|i)\b|\b(?:would|do)\s+you\s+(?:like|want|prefer)\s+(?:us|me)\s+to\b|"
    r"^(?:we|i)\s+(?:can|could)\s+(?:send|email|text)\s+you\b"
)


def _rewritten(norm: str) -> str:
    for pattern, repl in _REWRITES:
        norm = pattern.sub(repl, norm)
    return norm


@lru_cache(maxsize=4096)
def _requests(question: str) -> tuple[str, ...]:
    """The parts of the message that ask for something (see the module docstring)."""
    out: list[str] = []
    for sentence in sentences(question):
        norm = normalize(sentence)
        if not _REQUEST.search(norm):
            continue
        norm = _rewritten(norm)
        parts: list[str] = []
        for clause in _PARTS.split(norm):
            for piece in _CONDITION.split(clause or ""):
                piece = _CONTEXT.sub("", piece.strip(_TRIM)).strip(_TRIM)
                if not piece or all(t in _STOP for t in lemmas(piece)) or _OFFER.search(piece):
                    continue
                if piece.startswith("or ") and parts and not _OWN.search(piece[3:]):
                    parts[-1] = f"{parts[-1]} {piece}"  # "…on outside, or only around the house": the same question
                    continue
                modifier = _MODIFIER.match(piece)
                if modifier and parts:
                    prev = parts[-1]
                    cut = prev.rfind(f" {modifier.group(0)} ")
                    if cut > 0:  # "a photo of the receipt and of the damage": a photo of the damage too
                        parts.append(f"{prev[:cut]} {piece}")
                    else:  # "a picture of the scratch, with the serial sticker in shot"
                        parts[-1] = f"{prev} {piece}"
                elif parts and not _OWN.search(piece):  # "photograph the label and the fault"
                    parts.append(f"{_frame(parts[-1], piece)} {piece}")
                else:
                    parts.append(piece)
        out.extend(parts)
    return tuple(out)


@lru_cache(maxsize=4096)
def topics_asked(question: str | None) -> frozenset[str]:
    """The information topics a question asks about (empty when it asks for none of them).

    Each request part asks for at most one thing: its closest topic, when that is close enough and
    closer than the closest non-request."""
    if not question:
        return frozenset()
    asked = set()
    for part in _requests(question):
        best = _closest(part)
        topic, score = max(((t, best.get(t, 0.0)) for t in TOPICS), key=lambda ts: ts[1])
        if (
            score >= THRESHOLD
            and score > best.get("none", 0.0)
            and not (topic == "photos" and _photographs_a_document(part))
        ):
            asked.add(topic)
    return frozenset(asked)


def relevant_topics(ticket: Ticket) -> frozenset[str]:
    """The topics this ticket has hidden facts for: learning them can change the verdict."""
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
    """The customer's reply to ``question`` and the hidden-fact topics it states (asked or not)."""
    topics = topics_asked(question)
    rng = random.Random(stable_seed("customer", ticket.ticket_id, round_no, ",".join(sorted(topics))))
    text, stated = messages.render_customer_answer(
        rng, topics=topics, hidden=ticket.hidden, claim=ticket.claim, order=ticket.order
    )
    return text, stated & relevant_topics(ticket)
