"""Where natural precision goes: the links of ``zhdedup scan`` that join two different true groups.

    python -m benchmarks cross_links [--corpus inews pd1998 reviews clauses] [--exact-up-to SHINGLES]

The ``recall`` benchmark scores its natural sets against an exact join on character 5-grams with the
punctuation kept (Jaccard ≥ 0.7, or containment ≥ 0.9). The engine decides on estimated overlaps of
character 4-grams without punctuation (``NearRule``: Jaccard ≥ 0.65, or containment ≥ 0.85). Every
``dup_of`` link between documents of two different true groups costs precision. Each such link is
put under the first of three causes that fits it, from exact overlaps of the two texts:

- **punctuation**: the truth's own rule accepts the pair once punctuation is ignored (5-grams of the
  word characters, as the sketch shingles them): quote width, spaced punctuation, changed marks;
- **rule**: the engine's rule accepts the pair on its exact shingle overlap: a pair the rule is meant to
  accept (an edited or partly contained copy) and the truth's stricter line does not;
- **estimate**: only the sketch's estimate passed the rule (the exact overlap does not).

Judges each natural set with ``Deduper`` defaults in order, as ``recall`` does, then once more
with every candidate verified on the exact overlap of the two texts' shingles instead of the sketches'
estimates (:class:`~benchmarks.exact_overlaps.ExactOverlaps`: what a perfect sketch would decide, with the same candidates and
rule), and gives the pairwise P/R/F1 of both.  :func:`check` first puts three constructed pairs under
their causes.
"""

from __future__ import annotations

import argparse
import statistics
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from benchmarks import common, exact_overlaps, recall
from benchmarks.common import expect
from benchmarks.exact_overlaps import ExactOverlaps
from benchmarks.runner import Benchmark, Result, corpus_option
from corpora import recall_sets, truth
from corpora.corpus import SHINGLE as TRUTH_SHINGLE
from corpora.scoring import pairwise, predicted_clusters
from scrapy_zhdedup import DedupConfig
from scrapy_zhdedup.similarity.rule import NearRule
from scrapy_zhdedup.similarity.sketch import SHINGLE, Overlap, shingle_hashes

CAUSES = ("punctuation", "rule", "estimate")


def overlap(new: str, earlier: str, n: int) -> Overlap:
    """Exact overlap of ``new`` with ``earlier`` on ``n``-grams of word characters."""
    x, y = shingle_hashes(new, n), shingle_hashes(earlier, n)
    shared = np.intersect1d(x, y, assume_unique=True).size
    return Overlap(shared / (x.size + y.size - shared), shared / max(x.size, 1), x.size, y.size)


def cause(new: str, earlier: str, rule: NearRule) -> tuple[str, float]:
    """Why ``new`` was linked to ``earlier`` (:data:`CAUSES`), and their exact Jaccard on the engine's
    shingles."""
    mine = overlap(new, earlier, SHINGLE)
    if truth.is_duplicate(*truth.overlap(*(shingle_hashes(t, TRUTH_SHINGLE) for t in (new, earlier))),
                          *_sizes(new, earlier)):
        return "punctuation", mine.jaccard
    if rule.reason(mine) is not None:
        return "rule", mine.jaccard
    return "estimate", mine.jaccard


def _sizes(a: str, b: str) -> tuple[int, int]:
    x, y = shingle_hashes(a, TRUTH_SHINGLE), shingle_hashes(b, TRUTH_SHINGLE)
    return min(x.size, y.size), max(x.size, y.size)


def scores(docs: Sequence[recall_sets.Doc], links: Sequence[str | None]) -> dict[str, float]:
    p, r, f1 = pairwise(predicted_clusters(docs, links), [d.group for d in docs])
    return {"precision": p, "recall": r, "f1": f1}


def cross_links(docs: Sequence[recall_sets.Doc], config: DedupConfig, exact_up_to: int | None = None) -> dict[str, Any]:
    links = list(recall.Ours(config)(docs))
    exact_links = list(recall.Ours(config, overlaps=lambda: ExactOverlaps(exact_up_to))(docs))
    row = {d.id: i for i, d in enumerate(docs)}
    causes: Counter[str] = Counter()
    exact: dict[str, list[float]] = {c: [] for c in CAUSES}
    for doc, target in zip(docs, links):
        other = None if target is None else docs[row[target]]
        if other is not None and other.group != doc.group:
            why, value = cause(doc.text, other.text, NearRule.from_config(config))
            causes[why] += 1
            exact[why].append(value)
    return {"documents": len(docs), "links": sum(t is not None for t in links), "cross_group": sum(causes.values()),
            "causes": {c: causes[c] for c in CAUSES},
            "median_exact_overlap": {c: statistics.median(v) if v else None for c, v in exact.items()},
            "scores": scores(docs, links), "scores_on_exact_overlaps": scores(docs, exact_links)}


def run(args: argparse.Namespace) -> Result:
    config = DedupConfig()
    results: dict[str, Any] = {}
    rows = []
    for corpus in args.corpus:
        docs, _ = recall_sets.build_sets(corpus, 600, 60, args.seed)["natural"]
        r = results[corpus] = cross_links(docs, config, args.exact_up_to)
        medians = r["median_exact_overlap"]
        rows.append([corpus, r["documents"], r["links"], r["cross_group"],
                     *(f"{r['causes'][c]} ({_fmt(medians[c])})" for c in CAUSES),
                     *(_prf(r[k]) for k in ("scores", "scores_on_exact_overlaps"))])
        print(f"  {corpus}: {r['cross_group']} of {r['links']} links join two true groups", flush=True)
    within = "" if args.exact_up_to is None else f" (both texts ≤ {args.exact_up_to} shingles)"
    printed = common.table(["corpus", "documents", "links", "across true groups",
                            *(f"{c} (median exact overlap)" for c in CAUSES),
                            "P / R / F1", f"P / R / F1 on exact overlaps{within}"], rows)
    return Result(results, [printed])


def options(parser: argparse.ArgumentParser) -> None:
    corpus_option(parser)
    parser.add_argument("--seed", type=int, default=recall_sets.SEED)
    parser.add_argument("--exact-up-to", type=int, metavar="SHINGLES",
                        help="verify on exact overlaps only when both texts have at most this many shingles")


def check() -> None:
    """Three pairs of a real article with their causes known: spaced punctuation (the truth's 5-grams see
    the marks, ours do not), an edit the rule accepts on the exact overlap, and two different articles;
    and the exact overlaps the second run verifies on (``exact_overlaps.check``)."""
    from corpora.corpus import load_base

    exact_overlaps.check()
    first, second = (a.text[:300] for a in load_base(limit=2))
    rule = NearRule()
    spaced = first.replace("，", " , ").replace("。", " . ")
    expect(cause(spaced, first, rule)[0] == "punctuation", "spaced punctuation is not put under punctuation")
    edited = "".join("某" if i % 28 == 10 else c for i, c in enumerate(first))  # ~4/28 of our shingles, ~5/28 of the truth's
    why, jaccard = cause(edited, first, rule)
    expect(why == "rule" and jaccard >= rule.similarity, f"an edit the rule accepts is put under {why} ({jaccard:.2f})")
    expect(cause(first, second, rule)[0] == "estimate", "two different articles are not put under estimate")


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _prf(s: dict[str, float]) -> str:
    return f"{s['precision']:.3f} / {s['recall']:.3f} / {s['f1']:.3f}"


BENCHMARKS = (Benchmark("cross_links", __doc__, run, options, check=check),)
