"""What each part of issue 31's rule buys: F1 and precision with and without it, every natural corpus.

    python -m benchmarks rule_parts [--corpus inews pd1998 reviews clauses poems]

The engine's store is replayed here on its own features (``Fingerprinter.features``; keys, posting
limit and verification as nearindex.py does them), so that one part at a time can be taken out:

- **direction**: the rule before issue 31 instead (Jaccard ≥ 0.65, or ≥ 85 % of the *shorter* text
  inside the longer, whichever came first; ``similarity`` was the larger of the two);
- **originals only**: every earlier text a candidate (chains of repeats), not only cluster originals;
- **128 bins**: the sketch's 64-bin view verifies (sketch.key_view: exactly the 64-bin sketch);
- **furniture lines**: features of the whole text (furniture.py not applied);
- **smallest texts**: texts under ``NearRule.min_shingles`` judged like the others.

Scores against both truths of the ``recall`` benchmark (the issue's join with punctuation kept, and the
same join on word characters), and the count of links whose later text is mostly new.
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from benchmarks import common
from benchmarks.runner import Benchmark, Result, corpus_option
from corpora import recall_sets, sources
from corpora.scoring import mostly_new, pairwise, predicted_clusters
from scrapy_zhdedup import DedupConfig
from scrapy_zhdedup.index.nearindex import MAX_POSTINGS
from scrapy_zhdedup.model import Features, Sketch
from scrapy_zhdedup.similarity.fingerprinter import Fingerprinter
from scrapy_zhdedup.similarity.rule import NearRule
from scrapy_zhdedup.similarity.sketch import Overlap, band_keys, estimate_many, features_of, key_view, sketch

RULE = NearRule.from_config(DedupConfig())


@dataclass(frozen=True)
class Parts:
    direction: bool = True
    originals_only: bool = True
    bins_128: bool = True
    furniture: bool = True
    smallest: bool = True


VARIANTS = {
    "issue 31 rule (all parts)": Parts(),
    "without direction": Parts(direction=False),
    "without originals only": Parts(originals_only=False),
    "without 128 bins (64)": Parts(bins_128=False),
    "without furniture lines": Parts(furniture=False),
    "without the smallest-text line": Parts(smallest=False),
    "before issue 31 (none of them)": Parts(False, False, False, False, False),
}


def undirected(overlap: Overlap, similarity: float = 0.65, containment: float = 0.85) -> bool:
    """The rule before issue 31, from a new text's directed overlap: containment of the smaller text."""
    a, b = overlap.shingles, overlap.other
    j = overlap.jaccard
    inside = overlap.contained if a <= b else min(1.0, j * (a + b) / ((1 + j) * max(b, 1)))
    return j >= similarity or (inside >= containment and min(a, b) >= 10)


def accepts(parts: Parts, overlap: Overlap) -> bool:
    if not parts.direction:
        return undirected(overlap)
    rule = RULE if parts.smallest else replace(RULE, min_shingles=0)
    return rule.reason(overlap) is not None


def features(texts: Sequence[str]) -> tuple[list[str], list[Features], list[Features]]:
    """Each cleaned text's content hash and features, as the engine computes them and without its
    furniture step (``natural`` keeps only texts that clean to something)."""
    fingerprinter = Fingerprinter(DedupConfig())
    digests, engine, whole = [], [], []
    for text in texts:
        prepared = fingerprinter.prepare("x", text=text)
        f = fingerprinter.features(prepared.clean)
        digests.append(prepared.digest)
        engine.append(f)
        whole.append(features_of(f.fingerprint, f.passages, sketch(prepared.clean)))
    return digests, engine, whole


def judge(feats: Sequence[Features], digests: Sequence[str], parts: Parts) -> list[int | None]:
    """Per text, the earlier text it repeats (exact first, then near), the store's loop."""
    links: list[int | None] = []
    first: dict[str, int] = {}
    postings: dict[int, list[int]] = defaultdict(list)
    sketches: dict[int, Sketch] = {}
    original: set[int] = set()
    for i, (f, digest) in enumerate(zip(feats, digests)):
        if digest in first:
            links.append(first[digest])
            continue
        first[digest] = i
        mine = f.sketch if parts.bins_128 else _view(f.sketch)
        rows = sorted({r for k in f.sketch_keys if len(postings[k]) <= MAX_POSTINGS for r in postings[k]
                       if not parts.originals_only or r in original})
        best = None
        if rows:
            overlaps = estimate_many(mine, np.stack([sketches[r].values for r in rows]),
                                     np.array([sketches[r].shingles for r in rows]))
            accepted = [(-o.jaccard, r) for o, r in zip(overlaps, rows) if accepts(parts, o)]
            best = min(accepted)[1] if accepted else None
        links.append(best)
        sketches[i] = mine
        if best is None:
            original.add(i)
        for k in band_keys(f.sketch):
            postings[k].append(i)
    return links


def _view(s: Sketch) -> Sketch:
    return Sketch(key_view(s.values).astype(np.uint16), s.shingles)


def run_corpus(corpus: str) -> dict[str, Any]:
    raw = ([a.text for a in sources.long_corpus(corpus)] if corpus in sources.LONG_CORPORA
           else list(sources.short_corpus(corpus)))
    docs, _ = recall_sets.natural(raw, f"{corpus}-nat")
    words = recall_sets.word_groups(docs)
    digests, engine, whole = features([d.text for d in docs])
    out: dict[str, Any] = {"documents": len(docs)}
    for name, parts in VARIANTS.items():
        links = judge(engine if parts.furniture else whole, digests, parts)
        ids = [None if t is None else docs[t].id for t in links]
        pred = predicted_clusters(docs, ids)
        p, r, f1 = pairwise(pred, [d.group for d in docs])
        wp, wr, wf1 = pairwise(pred, words)
        out[name] = {"precision": p, "recall": r, "f1": f1, "word_truth": [wp, wr, wf1],
                     "mostly_new": mostly_new(docs, ids)}
        print(f"  [{corpus}] {name}: P={p:.3f} R={r:.3f} F1={f1:.3f} | words P={wp:.3f} F1={wf1:.3f} | "
              f"mostly new {out[name]['mostly_new']}", flush=True)
    return out


def run(args: argparse.Namespace) -> Result:
    results = {corpus: run_corpus(corpus) for corpus in args.corpus}
    rows = [[c, name, f"{v['precision']:.3f} / {v['recall']:.3f} / {v['f1']:.3f}",
             " / ".join(f"{x:.3f}" for x in v["word_truth"]), v["mostly_new"]]
            for c, r in results.items() for name, v in r.items() if name != "documents"]
    table = common.table(["corpus", "variant", "P / R / F1", "P / R / F1, word-character truth", "mostly new"], rows)
    return Result(results, [table])


BENCHMARKS = (Benchmark("rule_parts", __doc__, run, corpus_option),)
