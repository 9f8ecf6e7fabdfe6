"""Which texts OpenCC's t2s conversion can change, so that the others skip it (issue 40: 32 µs a news text,
and it changed 179 of 7,282).

OpenCC replaces each dictionary key it finds in a text by the key's first value and copies everything
else, so a text holding no key whose first value differs from it comes out as it went in.  Such a key is
a character (:data:`~scrapy_zhdedup.text.t2s_keys.CHARACTERS`: traditional forms, compatibility
ideographs) or a phrase; a phrase holding one of those characters is found by that character, the others
(:data:`~scrapy_zhdedup.text.t2s_keys.PHRASES`, 沈默 → 沉默) by themselves, looked for only when the
text holds a character where such a phrase differs.  The keys are read from OpenCC's compiled
dictionaries by its ``opencc_dict`` tool (:func:`derive`, ``scripts/update_t2s_keys.py``) and shipped
with the digest of those dictionaries: an OpenCC whose t2s dictionaries differ converts every text.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from functools import cache
from pathlib import Path

from . import t2s_keys

_BMP = 0x10000  # characters outside the BMP convert always


def dictionaries(config: Path) -> list[Path]:
    """The dictionary files an OpenCC configuration (t2s.json) names, in the order it names them."""
    names: list[str] = []

    def walk(node: object) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("file"), str):
                names.append(node["file"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(json.loads(config.read_text(encoding="utf-8")))
    return [config.parent / name for name in names]


def digest(config: Path) -> str:
    """What the keys were derived from: the configuration and every dictionary it names."""
    h = hashlib.blake2b(digest_size=16)
    for path in (config, *dictionaries(config)):
        h.update(path.read_bytes())
    return h.hexdigest()


@cache  # one per configuration: its digest reads every dictionary (~6 ms), and every TextCleaner asks
def convertible(config: Path) -> Callable[[str], bool]:
    """A test that is False only for texts OpenCC with ``config`` leaves unchanged: the shipped keys' when
    they were derived from these dictionaries, else one that is always True."""
    try:
        same = digest(config) == t2s_keys.DIGEST
    except (OSError, ValueError):  # a layout this module does not know: convert everything
        same = False
    if not same:
        return lambda text: True
    import numpy as np  # here: a process that converts nothing needs none of this

    # By the first character where each differs, which the text must hold, with where that character stands
    # in the phrase: the phrase is then looked for only there, around each place the text has it (a search
    # of the whole text for each of up to 42 phrases was ~60 µs for the news texts holding 坏, 覆 or 沈).
    phrases: dict[str, list[tuple[str, int]]] = {}
    for phrase, differing in zip(t2s_keys.PHRASES, t2s_keys.PHRASE_CHARACTERS):
        phrases.setdefault(differing[0], []).append((phrase, phrase.index(differing[0])))
    # Both kinds by code point, in one table: the code points of the text looked up at once (~15 µs a news
    # text, against ~19 for a regex class of them, whose compiling took ~6 ms of every start-up, issue 40).
    # Every code point outside the BMP looks up the last entry, which is set.
    wanted = np.zeros(_BMP + 1, dtype=bool)
    wanted[np.frombuffer((t2s_keys.CHARACTERS + "".join(phrases)).encode("utf-32-le"), dtype=np.uint32)] = True
    wanted[_BMP] = True

    def test(text: str) -> bool:
        points = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
        found = points[wanted.take(points, mode="clip")]
        return any(c not in phrases or _holds_phrase(text, c, phrases[c]) for c in set(map(chr, found.tolist())))

    return test


def _holds_phrase(text: str, character: str, phrases: list[tuple[str, int]]) -> bool:
    """Whether one of ``phrases`` (each with the place of ``character`` in it) is in ``text``: a phrase that is
    there has ``character`` where the text has it, so only those places are tried."""
    at = text.find(character)
    while at >= 0:
        if any(at >= offset and text.startswith(phrase, at - offset) for phrase, offset in phrases):
            return True
        at = text.find(character, at + 1)
    return False


def derive(config: Path, tool: Path) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
    """The BMP characters and the phrases (with the characters where each differs) that the dictionaries of
    ``config`` convert to something else, read with OpenCC's ``opencc_dict`` ``tool``."""
    import subprocess  # here, not at the top: ~10 ms of every start-up, for a tool only the keys' update runs
    import tempfile

    characters: set[str] = set()
    phrases: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for path in dictionaries(config):
            text = Path(tmp) / f"{path.stem}.txt"
            subprocess.run([str(tool), "-i", str(path), "-o", str(text), "-f", "ocd2", "-t", "text"], check=True,
                           capture_output=True)
            for line in text.read_text(encoding="utf-8").splitlines():
                key, values = line.split("\t")
                first = values.split(" ")[0]
                if first == key:
                    continue
                if len(key) == 1:
                    characters.add(key)
                elif len(first) != len(key):
                    phrases[key] = key
                else:
                    phrases[key] = "".join(k for k, v in zip(key, first) if k != v)
    bmp = "".join(sorted(c for c in characters if ord(c) <= 0xFFFF))
    alone = sorted((key for key in phrases if not characters.intersection(key)), key=lambda k: (-len(k), k))
    return bmp, tuple(alone), tuple(phrases[key] for key in alone)
