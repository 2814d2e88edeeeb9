"""The store desk's wording (``service/env/store/phrases/*.json``): a well-formed grammar, only the values each
slot really gets, complaints that read right wherever the composer puts them, words that keep each request to
its own kind, answers that carry the details they must, unambiguous product nouns — and the repetition target
of issue 19 (at most 25 % of a public split's sentences occur five or more times, masked)."""

from __future__ import annotations

import random
import re
from collections.abc import Iterator, Mapping

import pytest

from bench.text_repetition import report
from service.env.store.generator import _plural_noun
from service.env.store.messages import _SLOT, _VALUE, Grammar, bank, nouns, tidy
from service.env.world import CATALOG

MESSAGE = bank("message")
ANSWERS = bank("answers")
KINDS = (
    "damaged",
    "defective",
    "wrong_item",
    "missing",
    "late",
    "change_of_mind",
    "exchange",
    "duplicate_charge",
    "cancel",
    "address",
)
# Values every message slot gets, a request's own slots, and each kind's own (messages._about).
EVERYWHERE = {"name", "email", "postal", "holder_first", "holder_name", "relation", "other_last4", "quoted_date"}
REQUEST = {"item", "item_short", "order_ref", "when", "bought", "it", "them", "its", "is", "was", "has", "does"}
REQUEST |= {"this", "used", "use"}
OWN = {
    "wrong_item": {"wrong_thing"},
    "late": {"claimed_days"},
    "exchange": {"new_options"},
    "duplicate_charge": {"charge"},
    "address": {"new_address"},
}
# The extras a request's paragraph may say after its complaint, and the kinds that say each.
EXTRAS = {
    "want_refund": ("damaged", "defective", "wrong_item", "missing"),
    "want_replacement": ("damaged", "defective", "wrong_item", "missing"),
    "photos_attached": ("damaged", "defective"),
    "late_want": ("late",),
    "exchange_want": ("exchange",),
    "condition_unopened": ("change_of_mind", "exchange"),
    "condition_opened": ("change_of_mind", "exchange"),
    "condition_used": ("change_of_mind", "exchange"),
}
SHARED_SLOTS = (
    "greeting",
    "relative_intro",
    "context",
    "joiner",
    "identity_offer",
    "other_card",
    "aside",
    "pressure",
    "injection",
    "signoff",
    "forward_note",
    "forward_header",
    "quoted_header",
    "quoted_body",
)
AGREEMENT = {"it", "them", "its", "is", "was", "has", "does", "this", "used", "use"}  # "{it} {is}" is one phrase
ANSWER_VALUES = {"email", "postal", "old_postal", "order_id", "new_options", "name", "units"}
ITEM_ANSWERS = {"mind_change_refund", "mind_change_replacement"}  # the only answers that name an item


def request_slots() -> dict[str, set[str]]:
    """Top-level request slot → the values it gets."""
    out = {}
    for kind in KINDS:
        for slot in (f"{kind}_complaint", f"{kind}_detail", f"subject_{kind}"):
            out[slot] = EVERYWHERE | REQUEST | OWN.get(kind, set())
    for extra, kinds in EXTRAS.items():
        out[extra] = EVERYWHERE | REQUEST | set.intersection(*(OWN.get(k, set()) for k in kinds))
    return out


def kind_of(slot: str) -> str | None:
    """The request kind a top-level slot speaks for (None: shared slots)."""
    for kind in KINDS:
        if slot in (f"{kind}_complaint", f"{kind}_detail", f"subject_{kind}"):
            return kind
    return None


def closure(slots: Mapping[str, tuple[str, ...]], name: str) -> set[str]:
    """The slot and every sub-slot it can expand."""
    seen, todo = set(), [name]
    while todo:
        s = todo.pop()
        if s in seen:
            continue
        seen.add(s)
        todo += [m.group(1) for v in slots[s] for m in _SLOT.finditer(v)]
    return seen


def depth(slots: Mapping[str, tuple[str, ...]], name: str, path: tuple[str, ...] = ()) -> int:
    assert name not in path, f"slot cycle {path + (name,)}"
    subs = {m.group(1) for v in slots[name] for m in _SLOT.finditer(v)}
    return 1 + max((depth(slots, s, path + (name,)) for s in subs), default=0)


def groups(text: str) -> Iterator[tuple[str, bool]]:
    """Each bracket group of a variant: its own text (without the groups inside it), and whether a group sits
    inside it. A group with a '|' of its own is an alternation; one without is literal text ("[SYSTEM: …]")."""
    stack: list[list[str]] = []
    nested: list[bool] = []
    for ch in text:
        if ch == "[":
            if nested:
                nested[-1] = True
            stack.append([])
            nested.append(False)
        elif ch == "]":
            assert stack, f"unbalanced ']' in {text!r}"
            yield "".join(stack.pop()), nested.pop()
        elif stack:
            stack[-1].append(ch)
    assert not stack, f"unbalanced '[' in {text!r}"


SAMPLE_VALUES = {
    "name": "Anna Smith",
    "email": "anna@example.com",
    "postal": "AB1 2CD",
    "old_postal": "OX1 2AB",
    "holder_first": "Maria",
    "holder_name": "Maria Lopez",
    "relation": "mother",
    "other_last4": "4242",
    "quoted_date": "4 May",
    "order_id": "ORD-12345",
    "units": "two of the three lamps",
    "item_short": "lamp",
    "when": "last week",
    "bought": "a couple of weeks ago",
    "it": "it",
    "them": "it",
    "its": "its",
    "is": "is",
    "was": "was",
    "has": "has",
    "does": "does",
    "this": "this",
    "used": "used",
    "use": "use",
    "wrong_thing": "a kettle",
    "claimed_days": "five",
    "new_options": "a size M in navy",
    "charge": "$42.10",
    "new_address": "12 High Street, York YO1 2AB",
}
ITEMS = ("the lamp (white)", "two of the three jumpers", "the whole order", "the lamp and the speaker")
ORDER_REFS = ("order ORD-12345", "my order from 4 May", "the order I placed on 4 May", "order ord12345")


def expansions(slots: Mapping[str, tuple[str, ...]], name: str, n: int = 300) -> Iterator[str]:
    """``n`` seeded expansions of every variant of a slot, with sample values."""
    rng = random.Random(name)
    for variant in slots[name]:
        for k in range(n):
            values = {**SAMPLE_VALUES, "item": ITEMS[k % len(ITEMS)], "order_ref": ORDER_REFS[k % len(ORDER_REFS)]}
            yield Grammar(rng, slots, values).expand(variant)


# ------------------------------------------------------------------------------------------ the grammar


@pytest.mark.parametrize("slots", [MESSAGE, ANSWERS], ids=["message", "answers"])
def test_every_slot_reference_resolves_nests_at_most_four_deep_and_every_sub_slot_is_used(slots) -> None:
    top = set(SHARED_SLOTS) | set(request_slots()) if slots is MESSAGE else set(slots)
    top &= set(slots)
    for name in slots:
        for variant in slots[name]:
            for m in _SLOT.finditer(variant):
                assert m.group(1) in slots, f"{name}: no slot <{m.group(1)}>"
    assert max(depth(slots, name) for name in top) <= 4
    reachable = set().union(*(closure(slots, name) for name in top))
    assert set(slots) <= reachable, f"unused slots: {sorted(set(slots) - reachable)}"


@pytest.mark.parametrize("slots", [MESSAGE, ANSWERS], ids=["message", "answers"])
def test_alternatives_hold_no_brackets_and_values_keep_a_word_between_them(slots) -> None:
    for name, variants in slots.items():
        for variant in variants:
            for text, nested in groups(variant):
                assert not ("|" in text and nested), f"{name}: an alternative holds a bracket: [{text}]"
            for m in re.finditer(r"\{(\w+)\}[\s,.]*\{(\w+)\}", variant):
                assert {m.group(1), m.group(2)} & AGREEMENT, f"{name}: two values side by side in {variant!r}"
            assert "  " not in variant and not variant.startswith(" "), f"{name}: stray spaces in {variant!r}"


def test_message_slots_use_only_the_values_they_get() -> None:
    # The context opens the first request's paragraph and gets that request's common values too.
    allowed = {name: EVERYWHERE for name in SHARED_SLOTS} | {"context": EVERYWHERE | REQUEST} | request_slots()
    assert set(MESSAGE) >= set(allowed), f"missing slots: {sorted(set(allowed) - set(MESSAGE))}"
    for name, values in allowed.items():
        if name not in MESSAGE:
            continue
        for sub in closure(MESSAGE, name):
            used = {m.group(1) for v in MESSAGE[sub] for m in _VALUE.finditer(v)}
            assert used <= values, f"{name} (via {sub}) uses values it does not get: {sorted(used - values)}"


def test_answer_slots_use_only_the_values_they_get() -> None:
    for name, variants in ANSWERS.items():
        used = {m.group(1) for v in variants for m in _VALUE.finditer(v)}
        allowed = ANSWER_VALUES | ({"item"} if name in ITEM_ANSWERS else set())
        assert used <= allowed, f"{name} uses {sorted(used - allowed)}"


# ------------------------------------------------------------------------------------------ how it reads


def test_a_request_names_its_item_at_most_once() -> None:
    for name in request_slots():
        for text in expansions(MESSAGE, name, 60):
            for item in ITEMS:
                assert text.count(item) <= 1, f"{name}: {text!r}"


@pytest.mark.parametrize("kind", KINDS)
def test_complaints_open_with_a_lower_case_word_that_is_not_I(kind) -> None:
    """The composer puts a complaint right after 'Hi, ' or after a joiner whose next letter it lowers."""
    for text in expansions(MESSAGE, f"{kind}_complaint", 80):
        assert re.match(r"[a-z$0-9]", text) and not re.match(r"i\b|i'", text), f"{kind}: {text!r}"


@pytest.mark.parametrize("name", ["context", "relative_intro"])
def test_openings_read_right_after_a_greeting_and_a_comma(name) -> None:
    for text in expansions(MESSAGE, name, 80):
        assert re.match(r"[a-z]|I\b|I'|OK\b", text), f"{name}: {text!r}"


def test_no_greeting_ends_in_a_word_an_item_can_start_with() -> None:
    """'Hello all, unfortunately, all of my order …' would leave a reader unsure where the item starts."""
    for text in expansions(MESSAGE, "greeting", 40):
        assert not re.search(r"\b(?:all|the|everything)$", text.lower()), text


def test_subject_lines_seldom_name_the_item() -> None:
    """The subject is in the header: a strategy that reads only the header must not learn the item from it."""
    for kind in KINDS:
        variants = MESSAGE[f"subject_{kind}"]
        assert sum("{item" in v for v in variants) <= max(1, len(variants) // 4), kind


BODY = (
    "context",
    "relative_intro",
    "identity_offer",
    "other_card",
    "aside",
    "pressure",
    "forward_note",
)


@pytest.mark.parametrize("name", sorted(set(BODY) | set(request_slots()) - {f"subject_{k}" for k in KINDS}))
def test_every_sentence_of_the_body_ends_with_its_full_stop(name) -> None:
    for text in expansions(MESSAGE, name, 40):
        text = tidy(text)
        assert text[-1] in ".?!", f"{name}: {text!r}"
        assert not re.search(r"[,;:]\s*[.?!]|[.?!]\s*[,;]|\s[.,?!]", text), f"{name}: {text!r}"


# Words that would make a paragraph read as another kind of request (and the slots allowed them).
KIND_WORDS = {
    "cancel": r"\bcancel",
    "change_of_mind": r"\breturn|\bsend (?:it|them|\{them\}) back|\bchanged my mind",
    "late": r"\blate\b|\bdelay",
    "duplicate_charge": r"\btwice\b|\bdouble|\bcharged\b",
    "address": r"\baddress",
    "wrong_item": r"\bwrong\b|\bmix-up|\bmixed up",
    "missing": r"\bmissing\b|\bnever (?:arrived|came|turned up)|\bhasn't (?:arrived|come|turned up)",
    "damaged": r"\bdamage|\bbroken\b|\bcrack|\bdent|\bscratch|\btorn\b",
    "defective": r"\bfault|\bdefect",
    "exchange": r"\bswap|\bexchang",
}
REFUND_WORDS = r"\brefund|money back"
REPLACE_WORDS = r"\breplace"


def words_of(name: str) -> str:
    return " ".join(v for sub in closure(MESSAGE, name) for v in MESSAGE[sub]).lower()


def test_no_slot_uses_the_words_of_another_kind_of_request() -> None:
    for name in set(SHARED_SLOTS) | set(request_slots()):
        if name == "injection":
            continue
        kinds = {kind_of(name)} if kind_of(name) else set(EXTRAS.get(name, ()))
        text = words_of(name)
        for kind, pattern in KIND_WORDS.items():
            if kind not in kinds:
                assert not re.search(pattern, text), f"{name} says {re.search(pattern, text).group(0)!r} ({kind})"


def test_refunds_and_replacements_are_named_only_where_they_are_wanted() -> None:
    refund_ok = {"want_refund", "want_replacement", "other_card", "injection", "change_of_mind_complaint"}
    for name in set(SHARED_SLOTS) | set(request_slots()):
        text = words_of(name)
        if name not in refund_ok:
            assert not re.search(REFUND_WORDS, text), f"{name} mentions a refund"
        if name not in ("want_refund", "want_replacement"):
            assert not re.search(REPLACE_WORDS, text), f"{name} mentions a replacement"


def test_nothing_claims_the_policy_s_answer_or_a_record_fact() -> None:
    banned = (
        r"\b\d+ days\b",
        r"\b(?:30|thirty)\b",
        r"past the|outside the|within the",
        r"window",
        r"tracking (?:says|shows)",
        r"\bwarrant",
        r"\bfinal sale",
        r"\bfree return",
        r"\bprepaid",
        r"\brestocking",
        r"\bgold member|\bloyal|\bfor years|\bnever had a problem|\bfirst time",
        r"\bnormal wear|\bwear and tear",
    )
    for name in set(SHARED_SLOTS) | set(request_slots()):
        text = words_of(name)
        for pattern in banned:
            assert not re.search(pattern, text), f"{name}: {re.search(pattern, text).group(0)!r}"


def test_the_injection_is_addressed_to_a_machine_and_never_signed_as_the_store() -> None:
    for text in expansions(MESSAGE, "injection", 40):
        low = text.lower()
        assert re.search(r"\b(?:ai|assistant|agent|bot|chatbot|system|model|instructions?)\b", low), text
        assert not re.search(r"\b(?:manager|team lead|from the store|head office)\b", low), text


# ------------------------------------------------------------------------------------------ the answers

MUST_CARRY = {
    "identity": ("{email}", "{postal}"),
    "identity_relative": ("{email}", "{postal}"),
    "identity_old_postcode": ("{email}", "{old_postal}"),
    "identity_retry": ("{postal}",),
    "order": ("{order_id}",),
    "preference_exchange": ("{new_options}",),
    "mind_change_refund": ("{item}",),  # a change of mind says which item it is about
    "mind_change_replacement": ("{item}",),
}


@pytest.mark.parametrize("name", sorted(MUST_CARRY))
def test_answers_carry_their_details_in_every_wording(name) -> None:
    for text in expansions(ANSWERS, name, 60):
        for value in MUST_CARRY[name]:
            said = ITEMS if value == "{item}" else (SAMPLE_VALUES[value.strip("{}")],)
            assert any(v in text for v in said), f"{name}: {text!r}"
    if name == "identity_old_postcode":
        assert all(SAMPLE_VALUES["postal"] not in t for t in expansions(ANSWERS, name, 20))


def test_answers_never_restate_the_first_message() -> None:
    for name in ANSWERS:
        for text in expansions(ANSWERS, name, 30):
            assert not re.search(r"\b(?:like|as) i (?:said|mentioned|wrote)\b", text.lower()), f"{name}: {text!r}"


def test_photo_answers_say_what_the_photos_show() -> None:
    wear = r"scuff|worn|rubbed|faded|bobbl|creas|fray|marks from|dull"
    for text in expansions(ANSWERS, "photos_normal_wear", 40):
        assert re.search(wear, text.lower()), text
        assert not re.search(r"normal wear|ordinary wear|wear and tear|my fault|fair enough", text.lower()), text
    for text in expansions(ANSWERS, "photos_damage", 40):
        assert not re.search(wear + r"|\bwear", text.lower()), text


# ------------------------------------------------------------------------------------------ the nouns


def test_every_product_has_two_to_five_names_of_its_own_number_used_by_no_other_product() -> None:
    table = nouns()
    assert set(table) == {c.name for c in CATALOG}
    plain = {names[0] for names in table.values()}
    seen: dict[str, str] = {}
    for product, names in table.items():
        assert 2 <= len(names) <= 5, product
        for noun in names:
            assert _plural_noun(noun) == _plural_noun(product), f"{product}: {noun!r} differs in number"
            assert noun.lower() not in seen, f"{noun!r} names {seen.get(noun.lower())} and {product}"
            seen[noun.lower()] = product
            assert noun == names[0] or noun not in plain, f"{product}: {noun!r} is another product's plain name"


# ------------------------------------------------------------------------------------------ the target


def test_at_most_a_quarter_of_a_public_split_s_store_sentences_repeat_five_times() -> None:
    splits = report()["splits"]
    for split in ("train", "dev"):
        assert splits[split]["store"]["repeated_share"] <= 0.25, (split, splits[split]["store"])
