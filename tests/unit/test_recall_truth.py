"""The recall benchmark's ground truth: the prefix-filtered join finds exactly the brute-force pairs."""

from __future__ import annotations

import itertools
import random

import numpy as np

from corpora import truth
from corpora.corpus import shingle_hashes
from corpora.exact_overlaps import ExactOverlaps, SimulatedSketch
from corpora.scoring import cause, overlap, pairwise
from scrapy_zhdedup import Deduper
from scrapy_zhdedup.model import rounded
from scrapy_zhdedup.similarity import sketch as engine
from scrapy_zhdedup.similarity.rule import NearRule
from scrapy_zhdedup.similarity.sketch import SHINGLE
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


def test_cross_links_are_put_under_their_cause() -> None:
    text = zhtexts.articles(1)[0].text[:300]
    rule = NearRule()
    spaced = text.replace("，", " , ").replace("。", " . ")  # the truth's 5-grams see the marks, ours do not
    assert cause(spaced, text, rule)[0] == "punctuation"
    edited = "".join("某" if i % 28 == 10 else c for i, c in enumerate(text))  # ~4/28 of our shingles, ~5/28 of the truth's
    why, exact = cause(edited, text, rule)
    assert why == "rule" and exact >= rule.similarity
    other = zhtexts.articles(2)[1].text[:300]
    assert cause(text, other, rule)[0] == "estimate"


def test_exact_overlaps_decide_on_the_texts_shingles() -> None:
    text = zhtexts.articles(1)[0].text[:300]
    copy = "".join("某" if i % 40 == 7 else c for i, c in enumerate(text)) + "(某某网)"
    clean = Deduper().fingerprinter.clean
    exact = overlap(clean(text=copy), clean(text=text), SHINGLE)
    with ExactOverlaps().patched():
        deduper = Deduper()
        deduper.check("a", text=text)
        verdict = deduper.check("b", text=copy)
    assert verdict.dup_of == "a"
    assert (verdict.similarity, verdict.contained) == (rounded(exact.jaccard), rounded(exact.contained))


def test_a_simulated_128_by_16_sketch_is_the_engines() -> None:
    text = zhtexts.articles(1)[0].text[:300]
    copy = text[40:] + "(某某网)"
    a, b = (frozenset(engine.shingle_hashes(t).tolist()) for t in (copy, text))
    simulated = SimulatedSketch(128, 16)
    assert (simulated.values(b) == engine.sketch(text).values).all()
    earlier = engine.sketch(text)
    assert simulated(a, b) == engine.estimate_many(engine.sketch(copy), earlier.values[None, :],
                                                   np.array([earlier.shingles]))[0]
    assert SimulatedSketch(256, 8)(a, b) != simulated(a, b)
