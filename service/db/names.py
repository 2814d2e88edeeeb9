"""When two agent names are one name: what a bound name's owner is protected against.

A name first run with a submitter key belongs to that submitter (``agent_names``, keyed by
:func:`name_key`). Two names that a reader of the leaderboard cannot tell apart must have one key, or
anybody could put a row that looks like someone else's on the board. :func:`name_key` is Unicode's
confusable *skeleton* (UTS #39, "Unicode Security Mechanisms", section 4), made blind to what a board
reader cannot see either:

1. compatibility forms folded (NFKC: fullwidth, mathematical and Roman-numeral letters);
2. invisible characters dropped (every ``Default_Ignorable_Code_Point``, format characters, and blank
   letters such as the Hangul fillers), accents and other combining marks dropped;
3. small capitals folded to their letter ("ᴄʟᴀᴜᴅᴇ"): the key ignores case, and UTS #39 leaves most of them
   out (they are confusable with capitals, not with small letters);
4. every character replaced by its prototype from Unicode's ``confusables.txt`` (:mod:`service.db.confusables`,
   generated from the data file: a capital I and a 1 are an l, "m" is "rn", a Cyrillic "а" an "a"), then
   case folded — and both again until nothing changes, since a capital's look-alike is often listed under its
   small letter ("В" reaches "b" only once folded);
5. spacing collapsed.

So "Claude", "CIaude", "ᴄʟᴀᴜᴅᴇ" and "Сlaude" (Cyrillic С) are one name, and so are "modern" and "modem".
The key is a key, not a name to show: "Acme" keys as "acrne". :func:`invisible_characters` is what a name
may not contain at all (refused at the API): format, control, private-use and surrogate characters and
the default-ignorable and blank ones.

Why a generated table and not a package: the maintained PyPI packages that ship Unicode's data either ship
it reshaped so that a prototype cannot be told from its look-alikes (confusable-homoglyphs), or an old
version (confusables: Unicode 13.0), or a compiled core with a pipeline of its own (disarm); the table is
7,000 lines of Unicode's data with its version and digest, read once at import, with no download at run
time and no dependency in the image. ``python -m service.db.names generate confusables.txt`` rewrites it
from a newer ``confusables.txt`` (a new table re-keys names: add a migration, as 0010 did).
"""

from __future__ import annotations

import functools
import hashlib
import sys
import unicodedata
from pathlib import Path

from service.db import confusables

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


def _small_capitals() -> dict[str, str]:
    """Latin small capitals (and their modifier forms) → their small letter, from the characters' names."""
    out = {}
    for point in range(0x10000):
        name = unicodedata.name(chr(point), "")
        for prefix in ("LATIN LETTER SMALL CAPITAL ", "LATIN SMALL CAPITAL LETTER "):
            letter = name.removeprefix(prefix)
            if letter != name and len(letter) == 1:
                out[chr(point)] = letter.lower()
    return out


_SMALL_CAPITALS = str.maketrans(_small_capitals())
_PROTOTYPES = str.maketrans(confusables.prototypes())


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


@functools.lru_cache(maxsize=4096)  # retention keys every ranked run's name on each pass
def name_key(name: str) -> str:
    """The skeleton two names share when they look alike (see the module docstring)."""
    text = name
    for _ in range(8):  # until a fixed point: three rounds at most in Unicode 18.0
        folded = _fold(text)
        if folded == text:
            break
        text = folded
    return " ".join(text.split())


def _fold(text: str) -> str:
    """One round of the skeleton: NFKC, nothing invisible, no marks, small capitals, prototypes, case. A
    prototype can be a compatibility character ("%" is "°/₀") and a capital's look-alike is often listed under
    its small letter, so the rounds repeat until nothing changes."""
    text = unicodedata.normalize("NFKC", text)
    text = "".join(" " if ch in BLANK else ch for ch in text if not _ignorable(ch) and unicodedata.category(ch) != "Cf")
    text = _unmarked(text).translate(_SMALL_CAPITALS).translate(_PROTOTYPES)
    return _unmarked(text.casefold())


def _unmarked(text: str) -> str:
    """NFD without the combining marks: accents are not what tells two names apart on a board."""
    return "".join(ch for ch in unicodedata.normalize("NFD", text) if unicodedata.category(ch) not in ("Mn", "Me"))


def generate(source: str, target: str) -> int:
    """Write :mod:`service.db.confusables` from Unicode's ``confusables.txt`` at ``source``: one line per
    mapping, the source code point and its prototype's, with the data file's version, date and digest."""
    raw = open(source, "rb").read()  # noqa: SIM115 - a one-shot tool
    header: dict[str, str] = {}
    lines = []
    for line in raw.decode("utf-8-sig").splitlines():
        if line.startswith("#") and ":" in line:
            key, _, value = line.lstrip("# ").partition(":")
            header.setdefault(key.strip(), value.strip())
        fields = line.split("#", 1)[0].split(";")
        if len(fields) >= 3 and fields[2].strip() == "MA":
            lines.append(f"{fields[0].strip()} {fields[1].strip()}")
    body = "\n".join(lines)
    module = f'''"""Unicode's confusable prototypes (UTS #39 ``confusables.txt``), generated by
``python -m service.db.names generate`` — do not edit by hand.

Source: confusables.txt, Version {header["Version"]}, Date {header["Date"]},
SHA-256 {hashlib.sha256(raw).hexdigest()}.
© Unicode, Inc.; used under the Unicode terms of use and license
(https://www.unicode.org/terms_of_use.html, https://www.unicode.org/license.txt).

Each line: a code point and the code points of its prototype (hexadecimal).
"""

from __future__ import annotations

UNICODE_VERSION = "{header["Version"]}"
MAPPINGS = {len(lines)}

_DATA = """\\
{body}
"""


def prototypes() -> dict[str, str]:
    """Every character of the table and its prototype."""
    out = {{}}
    for line in _DATA.splitlines():
        source, *target = line.split()
        out[chr(int(source, 16))] = "".join(chr(int(p, 16)) for p in target)
    return out
'''
    with open(target, "w", encoding="utf-8") as out:
        out.write(module)
    return len(lines)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2 or args[0] != "generate":
        print("usage: python -m service.db.names generate PATH/TO/confusables.txt", file=sys.stderr)
        return 2
    written = generate(args[1], str(Path(__file__).with_name("confusables.py")))
    print(f"wrote {written} mappings to service/db/confusables.py")
    return 0


if __name__ == "__main__":
    sys.exit(main())
