"""Passage hashes: the second way a near repeat is found (after the SimHash bands).

A SimHash within Hamming distance 3 only catches texts that are nearly identical as a whole;
a repost that drops a paragraph, is truncated, or gets another site's header moves the
fingerprint 6-12 bits although most of its sentences are untouched (cosine ~0.9 flips ~θ/π
of the bits).  Like DRPKP's paragraph fingerprints, we index the text's pieces: runs of
sentences of at least ``min_chars`` characters, hashed exactly after punctuation and spacing
are removed.  Documents sharing enough passages become candidates, which must then still be
within a looser SimHash distance, so two articles that only share a site's boilerplate
sentences (same template, different facts) are not merged.
"""

from __future__ import annotations

import hashlib
import math
import re

_ENDS = "。！？!?；;\n"
_NOT_WORD_OR_END = re.compile(rf"[^\w\u3400-\u9fff{_ENDS}]+")
_SENTENCE_ENDS = re.compile(f"[{_ENDS}]+")


def passage_keys(clean: str, min_chars: int = 20) -> list[int]:
    """32-bit keys of consecutive sentence runs, each run ≥ ``min_chars`` word characters.

    32 bits are enough: a colliding key only adds a candidate, and candidates are verified.
    """
    keys: list[int] = []
    run = ""
    for sentence in _SENTENCE_ENDS.split(_NOT_WORD_OR_END.sub("", clean)):
        run += sentence
        if len(run) >= min_chars:
            keys.append(_key(run))
            run = ""
    if len(run) >= min_chars // 2:
        keys.append(_key(run))
    return list(dict.fromkeys(keys))


def _key(run: str) -> int:
    return int.from_bytes(hashlib.blake2b(run.encode("utf-8"), digest_size=4).digest(), "big")


def votes_needed(n_passages: int, share: float) -> int:
    """Shared passages a candidate needs: a share of the new text's passages, and never fewer than 2."""
    return max(2, math.ceil(n_passages * share - 1e-9))


WEAK_EVIDENCE_BITS = 3  # how much closer a candidate sharing few passages must be


def distance_limit(shared: int, n_passages: int, share: float, threshold: int) -> int:
    """Max Hamming distance for a candidate sharing ``shared`` of ``n_passages`` passages; -1 = none.

    Sharing at least twice the minimum share is strong evidence: the full passage threshold.
    Between the minimum and twice it, two texts may share only a site's boilerplate sentences
    (same template, different facts), so the fingerprints must agree more closely.
    """
    if shared < votes_needed(n_passages, share):
        return -1
    if shared < votes_needed(n_passages, 2 * share):
        return threshold - WEAK_EVIDENCE_BITS
    return threshold
