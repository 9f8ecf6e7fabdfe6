"""Passage hashes: an optional third source of candidates (after the SimHash and sketch keys).

A SimHash within Hamming distance 3 only catches texts that are nearly identical as a whole;
a repost that drops a paragraph, is truncated, or gets another site's header moves the
fingerprint 6-12 bits although most of its sentences are untouched (cosine ~0.9 flips ~θ/π
of the bits).  Like DRPKP's paragraph fingerprints, we index the text's pieces: runs of
sentences of at least ``min_chars`` characters, hashed exactly after punctuation and spacing
are removed.  Documents sharing enough passages become candidates, verified like every other
candidate on their sketches (nearindex.py), so two articles that only share a site's
boilerplate sentences (same template, different facts) are not merged.  The sketch keys find
almost all of these too; passages add 1-2 points of recall on natural reposts at ~130 B per
document, hence off by default.
"""

from __future__ import annotations

import hashlib
import math
import re
from functools import cache

_ENDS = "。！？!?；;\n"


def passage_keys(clean: str, min_chars: int = 20) -> list[int]:
    """32-bit keys of consecutive sentence runs, each run ≥ ``min_chars`` word characters.

    32 bits are enough: a colliding key only adds a candidate, and candidates are verified.
    """
    keys: list[int] = []
    run = ""
    not_word_or_end, sentence_ends = _patterns()
    for sentence in sentence_ends.split(not_word_or_end.sub("", clean)):
        run += sentence
        if len(run) >= min_chars:
            keys.append(_key(run))
            run = ""
    if len(run) >= min_chars // 2:
        keys.append(_key(run))
    return list(dict.fromkeys(keys))


@cache
def _patterns() -> tuple[re.Pattern[str], re.Pattern[str]]:
    """What is neither a word character nor a sentence end, and the sentence ends: compiled for the first text
    (passages are off by default, and the CJK class cost ~1 ms of every process's start-up at import)."""
    return re.compile(rf"[^\w\u3400-\u9fff{_ENDS}]+"), re.compile(f"[{_ENDS}]+")


def _key(run: str) -> int:
    return int.from_bytes(hashlib.blake2b(run.encode("utf-8"), digest_size=4).digest(), "big")


def votes_needed(n_passages: int, share: float) -> int:
    """Shared passages a candidate needs: a share of the new text's passages, and never fewer than 2."""
    return max(2, math.ceil(n_passages * share - 1e-9))
