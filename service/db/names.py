"""When two agent names are one name: what a bound name's owner is protected against.

A name first run with a submitter key belongs to that submitter (``agent_names``, keyed by
:func:`name_key`). Two names that a reader of the leaderboard cannot tell apart must have one key, or
anybody could put a row that looks like someone else's on the board. :func:`name_key` is a *skeleton*
in the sense of Unicode's UTS #39: compatibility forms folded (NFKC: fullwidth, mathematical letters),
invisible characters dropped (every ``Default_Ignorable_Code_Point`` and blank letters such as the Hangul
fillers, which are not format characters), accents and other combining marks dropped, the letters of
other scripts that look like Latin ones mapped to those (Cyrillic "А", Greek "Ο"), ``1`` and ``|`` to ``l``
and ``0`` to ``o``, spacing collapsed, case folded first (so "ACME" and "acme" stay one name).
:func:`invisible_characters` is what a name may
not contain at all (refused at the API): format, control, private-use and surrogate characters and the
default-ignorable and blank ones.

The mapping is the few hundred code points an attacker would reach for, not the whole of Unicode's
confusables table; a name in another script keeps its own letters (only look-alikes of Latin letters are
folded).
"""

from __future__ import annotations

import unicodedata

# Unicode's Default_Ignorable_Code_Point (DerivedCoreProperties.txt), as ranges: rendered as nothing.
DEFAULT_IGNORABLE = (
    (0x00AD, 0x00AD),
    (0x034F, 0x034F),
    (0x061C, 0x061C),
    (0x115F, 0x1160),
    (0x17B4, 0x17B5),
    (0x180B, 0x180F),
    (0x200B, 0x200F),
    (0x202A, 0x202E),
    (0x2060, 0x206F),
    (0x3164, 0x3164),
    (0xFE00, 0xFE0F),
    (0xFEFF, 0xFEFF),
    (0xFFA0, 0xFFA0),
    (0xFFF0, 0xFFF8),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0000, 0xE0FFF),
)
BLANK = frozenset("\u2800\u3164\uffa0\u115f\u1160")  # letters and symbols that show as blank space
HIDDEN_CATEGORIES = frozenset({"Cf", "Cc", "Co", "Cs", "Cn"})

# Letters of other scripts that look like Latin ones (UTS #39 confusables, the ones that matter for names),
# after case folding: a capital that looks Latin ("В", "Н") is caught through its small letter, so every
# case of a name has one key.
_LOOK_ALIKES = {
    # Cyrillic
    "а": "a", "б": "6", "в": "b", "е": "e", "з": "3", "к": "k", "м": "m", "н": "h", "о": "o", "п": "n",
    "р": "p", "с": "c", "т": "t", "у": "y", "х": "x", "і": "i", "ј": "j", "ѕ": "s", "ԁ": "d", "һ": "h",
    "ӏ": "l", "ԛ": "q", "ԝ": "w", "ү": "y", "ь": "b",
    # Greek
    "α": "a", "β": "b", "ε": "e", "ζ": "z", "η": "n", "ι": "i", "κ": "k", "μ": "u", "ν": "v", "ο": "o",
    "ρ": "p", "τ": "t", "υ": "u", "χ": "x", "ϲ": "c", "ϳ": "j",
    # Armenian, Latin extensions and digits that read as Latin letters
    "օ": "o", "ս": "u", "ո": "n", "ց": "g", "ı": "i", "ȷ": "j", "ɡ": "g", "ℓ": "l",
    "1": "l", "|": "l", "0": "o",
    # dashes and minus signs
    "\u2010": "-", "\u2011": "-", "\u2012": "-", "\u2013": "-", "\u2014": "-", "\u2015": "-", "\u2212": "-",
}  # fmt: skip
_FOLD = str.maketrans(_LOOK_ALIKES)


def _ignorable(ch: str) -> bool:
    point = ord(ch)
    return any(low <= point <= high for low, high in DEFAULT_IGNORABLE)


def invisible_characters(text: str) -> list[str]:
    """The characters of ``text`` that show as nothing (or blank) or are not characters at all, as U+XXXX."""
    return sorted(
        {
            f"U+{ord(ch):04X}"
            for ch in text
            if unicodedata.category(ch) in HIDDEN_CATEGORIES or _ignorable(ch) or ch in BLANK
        }
    )


def name_key(name: str) -> str:
    """The skeleton two names share when they look alike (see the module docstring)."""
    text = unicodedata.normalize("NFKC", name)
    text = "".join(" " if ch in BLANK else ch for ch in text if not _ignorable(ch) and unicodedata.category(ch) != "Cf")
    text = unicodedata.normalize("NFD", text)
    text = "".join(ch for ch in text if unicodedata.category(ch) not in ("Mn", "Me"))
    text = " ".join(text.split()).casefold()
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).translate(_FOLD))
