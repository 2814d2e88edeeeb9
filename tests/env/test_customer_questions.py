"""The scripted customer's question reader (``service.env.customer.topics_asked``).

Accuracy on the human-written corpora (dev: ``questions.jsonl``; holdout: ``questions_holdout.jsonl``,
measured once after development and never tuned against), natural phrasings of each topic, requests
that ask for none of them, determinism and speed.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from service.env.customer import TOPICS, topics_asked

CORPUS = Path(__file__).resolve().parent / "corpus"
# Floors: dev measured 0.997 (336/337). The holdout was run once, after development, and not tuned
# against: 0.8854 (85/96), the same rate as the previous reader. The #12 audit's 35 new questions then
# read 0.77; concepts, phrasal verbs, scene-setting frames and "a photo of a document" (below) took them
# and 50 class probes (two batches: 0.89 and 0.92 before their fixes) into the dev corpus, now 0.995
# (420/422), and moved the holdout — whose misses were looked at, so it is no longer untouched — to
# 0.927 (89/96). Round 2: a blind set of 94 questions read 0.851; its classes fixed (tested below in new
# words) it reads 1.0 and joined the dev corpus (blind1-*) with a probe batch of 29 (0.897 before its
# fixes): dev 0.998 (544/545), holdout 0.948 (91/96). Round 4: blind batch 5 (55 questions) read 0.873; after
# its classes were fixed 0.909, and it joined the dev corpus (b5_q*; b5_q055 repeats q418 and was left out):
# dev 0.990 (593/599), holdout unchanged.
DEV_FLOOR = 0.97
HOLDOUT_FLOOR = 0.91


def _entries(name: str) -> list[dict]:
    return [json.loads(line) for line in (CORPUS / name).read_text(encoding="utf-8").splitlines() if line.strip()]


def _exact(name: str) -> tuple[float, list[tuple[str, str, list[str], list[str]]]]:
    entries = _entries(name)
    misses = [
        (e["id"], e["question"], sorted(e["topics"]), sorted(topics_asked(e["question"])))
        for e in entries
        if topics_asked(e["question"]) != set(e["topics"])
    ]
    return 1 - len(misses) / len(entries), misses


def test_dev_corpus_is_well_formed() -> None:
    entries = _entries("questions.jsonl")
    assert len(entries) >= 276
    assert len({e["id"] for e in entries}) == len(entries)
    assert len({e["question"].lower() for e in entries}) == len(entries)
    for e in entries:
        assert set(e["topics"]) <= set(TOPICS) and e["why"], e


@pytest.mark.parametrize(
    ("name", "floor"), [("questions.jsonl", DEV_FLOOR), ("questions_holdout.jsonl", HOLDOUT_FLOOR)]
)
def test_corpus_exact_match_accuracy(name: str, floor: float) -> None:
    exact, misses = _exact(name)
    assert exact >= floor, (name, round(exact, 4), misses)


@pytest.mark.parametrize(
    ("question", "topics"),
    [
        # photos
        ("Could you attach a photo of the problem?", {"photos"}),
        ("Can you send me a picture of the damage?", {"photos"}),
        ("Please upload a few images of the crack.", {"photos"}),
        ("Would you mind snapping a quick photo of the label?", {"photos"}),
        ("Do you have any pictures of it?", {"photos"}),
        ("A photo of the broken zip would help a lot.", {"photos"}),
        ("Could you record a video showing the noise?", {"photos"}),
        ("pics?", {"photos"}),
        # usage
        ("Is it still brand new in the box?", {"usage"}),
        ("Has the item been used?", {"usage"}),
        ("Have you worn the boots at all?", {"usage"}),
        ("Are the tags still attached?", {"usage"}),
        ("Has it been washed since it arrived?", {"usage"}),
        ("Is the packaging still sealed?", {"usage"}),
        ("Have you tried it on?", {"usage"}),
        ("What condition is it in now?", {"usage"}),
        # delivery
        ("Has it turned up since?", {"delivery"}),
        ("Has the parcel arrived yet?", {"delivery"}),
        ("Could you check with your neighbours?", {"delivery"}),
        ("Did anyone sign for the package?", {"delivery"}),
        ("Have you had a look in your parcel locker?", {"delivery"}),
        ("Is it possible the courier left it by the back gate?", {"delivery"}),
        ("Any sign of it yet?", {"delivery"}),
        ("Have you found the parcel?", {"delivery"}),
        # details
        ("Can you tell me more?", {"details"}),
        ("What exactly is wrong with it?", {"details"}),
        ("Could you describe the problem?", {"details"}),
        ("What happened?", {"details"}),
        ("Which item is faulty?", {"details"}),
        ("Can you explain what the issue is?", {"details"}),
        ("In what way is it defective?", {"details"}),
        ("What seems to be the issue with the kettle?", {"details"}),
        # several at once
        ("Could you send photos and tell me more?", {"photos", "details"}),
        ("Can you send a picture and tell me if it was worn?", {"photos", "usage"}),
        ("Has it turned up, and if so, has the box been opened?", {"delivery", "usage"}),
        ("What's wrong with it? Please attach a photo.", {"details", "photos"}),
        (
            "Could you send photos, tell me whether the item was used, check whether the parcel turned up, "
            "and describe exactly what the problem is?",
            {"photos", "usage", "delivery", "details"},
        ),
        # one topic mentioned, another asked
        ("Thanks for the photos, has it been used?", {"usage"}),
        ("Now that it has arrived, what exactly is wrong with it?", {"details"}),
        ("You said it's unused - could you send a photo of the tear?", {"photos"}),
        # asks for none of them
        ("Thanks, we'll be in touch.", set()),
        ("ok", set()),
        ("Thanks for your patience, we'll be in touch.", set()),
        ("I'm sorry to hear that.", set()),
        ("We've issued a refund to your card.", set()),
        ("Would you prefer a refund or a replacement?", set()),
        ("What's your order number?", set()),
        ("Could you attach a photo of your receipt?", set()),
        ("Is the delivery address still correct?", set()),
        ("Please keep the item in its original packaging until it is collected.", set()),
        ("Your photos have been passed to our team.", set()),
        ("", set()),
        (None, set()),
    ],
)
def test_natural_phrasings(question: str | None, topics: set[str]) -> None:
    assert topics_asked(question) == topics, question


@pytest.mark.parametrize(
    ("question", "topics"),
    [
        # a synonym no example uses shares its concept: shots, visual proof, laundered, a run, the wrong door
        ("Please take a couple of shots of the scuffed corner.", {"photos"}),
        ("We'll need visual proof of the defect before we can go further.", {"photos"}),
        ("Did you take them out for a run before the sole came off?", {"usage"}),
        ("Is there any chance it was delivered to the wrong door?", {"delivery"}),
        ("Has anything been handed in at your building's front desk?", {"delivery"}),
        # a phrasal verb is one word: "show me" is a picture, "show up" a parcel appearing
        ("Could you show me the damage?", {"photos"}),
        # a frame that only sets the scene asks nothing: "just to check"
        ("Just to check, is it in the condition you received it in?", {"usage"}),
        # a picture of a document is no evidence about the item; a choice is none of the topics
        ("Could you send a photo of your receipt?", set()),
        ("Could you send a photo of the packing slip?", set()),
        ("Is the parcel still nowhere to be seen?", {"delivery"}),
        ("Can you tell me which colour you'd like instead?", set()),
        # a picture of several things pictures each: the label and the damaged area
        ("Is it possible to get a clear picture of the label and the damaged area?", {"photos"}),
    ],
)
def test_questions_are_read_by_concept_not_by_keyword(question: str, topics: set[str]) -> None:
    assert topics_asked(question) == topics, question


@pytest.mark.parametrize(
    ("question", "topics"),
    [
        # photos: a close-up, an upload, wanting to see what the customer sees
        ("Would you be able to take a close-up of the scratch?", {"photos"}),
        ("Any chance of a close-up of the loose seam?", {"photos"}),
        ("I'd love to see what you're looking at - can you pop a pic in an email?", {"photos"}),
        # usage: out and about, compared with how it arrived, unwrapped
        ("Have the trainers been out for a walk yet, or are they still boxed?", {"usage"}),
        ("Is it still exactly as it was when it came?", {"usage"}),
        ("Is the lamp in the same condition as when you received it?", {"usage"}),
        ("Have you worn the coat outdoors, or just tried it on at home?", {"usage"}),
        ("Has the cellophane come off it?", {"usage"}),
        ("Have you unpacked it yet?", {"usage"}),
        # delivery: any luck, asking around
        ("Any luck tracking it down since?", {"delivery"}),
        ("Have you had any joy with the neighbours?", {"delivery"}),
        ("Could you ask around the flats in case a neighbour signed for it?", {"delivery"}),
        # details: what it does, what they found
        ("What did you notice when you took it out of the box?", {"details"}),
        ("What is it doing wrong?", {"details"}),
        ("What's it doing that it isn't meant to?", {"details"}),
        # none: contact times, instructions, offers, our own services
        ("When's the best time to ring you?", set()),
        ("What number should we call you on?", set()),
        ("Please use the enclosed label when you send the old one back.", set()),
        ("Shall we send you a picture of the new one before it goes out?", set()),
        ("Would you like us to text you the tracking details?", set()),
        ("Have you tried our mobile app before?", set()),
        ("Did you use the chat on our website last time?", set()),
    ],
)
def test_questions_the_blind_set_taught_by_class(question: str, topics: set[str]) -> None:
    """#12 round 2: the classes a blind set of 94 questions found (0.851 exact before), in new words."""
    assert topics_asked(question) == topics, question


@pytest.mark.parametrize(
    ("question", "topics"),
    [
        ("Is the clear film still on the display?", {"usage"}),  # a protective film is no video
        ("Could you film the fault for us?", {"photos"}),
        ("Does the calling card mention where it was left?", {"delivery"}),  # the card the courier leaves
        ("How does the crackling show itself?", {"details"}),  # showing itself is no picture
    ],
)
def test_question_probe_batch_one_classes(question: str, topics: set[str]) -> None:
    """#12 round 2: a probe batch of 29 new questions read 0.897 before these three classes."""
    assert topics_asked(question) == topics, question


def test_the_agents_own_questions_ask_their_topic() -> None:
    from service.env.agents import _QUESTIONS

    for topic, question in _QUESTIONS.items():
        assert topics_asked(question) == {topic}, (topic, question)


# Blind batch 5 (round 4, 55 questions: 0.873 before these), each class in new words.


@pytest.mark.parametrize(
    ("question", "topics"),
    [
        # a parcel that "reaches" the customer has arrived; reaching them by phone stays no topic
        ("Can you tell me if the package ever reached you?", {"delivery"}),
        ("Please tell us whether the shipment reached you.", {"delivery"}),
        ("Which number can we reach you on?", set()),
        # small talk about the customer's day asks for nothing, and leaves the real request alone
        ("How's your morning going?", set()),
        ("How has the weekend been treating you?", set()),
        ("How was your day - and could you send a photo of the crack?", {"photos"}),
        ("How are things with the kettle?", {"details"}),
    ],
)
def test_arrivals_and_small_talk(question: str, topics: set[str]) -> None:
    assert topics_asked(question) == topics, question


def test_reading_is_deterministic() -> None:
    questions = [e["question"] for e in _entries("questions.jsonl")]
    first = [topics_asked(q) for q in questions]
    topics_asked.cache_clear()
    assert [topics_asked(q) for q in questions] == first
    assert all(isinstance(t, frozenset) for t in first)


def test_reading_is_fast() -> None:
    """Uncached reading of the whole dev corpus after warm-up; measured 0.10-0.16 s for 337 questions,
    asserted generously. In this thread's CPU time, not wall-clock time: what the reading itself costs,
    whatever else the machine's cores are busy with."""
    from service.env import customer

    questions = [e["question"] for e in _entries("questions.jsonl")]
    for q in questions:  # warm-up: builds the index and the vocabulary
        topics_asked(q)
    topics_asked.cache_clear()
    customer._requests.cache_clear()
    customer._features.cache_clear()
    start = time.thread_time()
    for q in questions:
        topics_asked(q)
    elapsed = time.thread_time() - start
    print(f"topics_asked on {len(questions)} questions: {elapsed:.3f} s")
    assert elapsed < 5.0
