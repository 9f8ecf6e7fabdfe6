"""The recall benchmark's ground truth: the prefix-filtered join finds exactly the brute-force pairs."""

from __future__ import annotations

import itertools
import random

from corpora import truth
from corpora.corpus import shingle_hashes
from corpora.scoring import pairwise
from tests.support import zhtexts


def test_join_equals_brute_force() -> None:
    rng = random.Random(7)
    bases = [a.text[:400] for a in zhtexts.articles(12)]
    texts = list(bases)
    for base in bases:  # copies at every distance from the threshold: cut, extended, edited
        texts.append(base[: rng.randint(200, 400)])
        texts.append(base + rng.choice(bases)[: rng.randint(10, 200)])
        texts.append(zhtexts.edit_chars(base, rng.randint(5, 60), seed=rng.randint(0, 99)))
    sets = [shingle_hashes(t) for t in texts]
    brute = set()
    for a, b in itertools.combinations(range(len(texts)), 2):
        j, c = truth.overlap(sets[a], sets[b])
        if truth.is_duplicate(j, c, min(sets[a].size, sets[b].size), max(sets[a].size, sets[b].size)):
            brute.add((a, b))
    found = {(p.a, p.b) for p in truth.duplicate_pairs(texts)}
    assert found == brute
    assert 12 < len(brute) < len(texts) ** 2 // 4  # the set has pairs on both sides of the line


def test_pairwise_scores() -> None:
    # one true cluster {0,1,2} and a singleton 3; predicted {0,1} and {2,3}
    p, r, f1 = pairwise([0, 0, 2, 2], ["g", "g", "g", "h"])
    assert (p, r) == (0.5, 1 / 3)
    assert abs(f1 - 0.4) < 1e-9
