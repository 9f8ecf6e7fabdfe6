"""Do issue 10's two ground truths agree?  The natural sets' rule applied to the synthetic reposts.

    python -m benchmarks truth_on_synthetic [--corpus inews pd1998] [--without-punctuation]

The ``recall`` benchmark scores natural duplicates against an exact rule (character 5-grams with the
punctuation kept: Jaccard ≥ 0.7, or containment ≥ 0.9 of a smaller text of ≥ 10 shingles) and the
synthetic sets against how each repost was made (every repost of an article is its duplicate).
Here every synthetic repost is checked against its original by the natural sets' rule, both texts
cleaned by the engine's ``TextCleaner`` first (NFKC and t2s, so width and script changes do not
count against it; ``--without-punctuation`` also drops punctuation and spacing, as the engine's
sketch does), and the share that rule calls duplicates is printed by kind.  A kind that rule
mostly rejects cannot reach the synthetic recall target by a method that also reaches the natural
precision target by agreeing with that rule.
"""

from __future__ import annotations

import argparse
from collections import Counter

from benchmarks import common
from benchmarks.runner import Benchmark, Result, corpus_option, positive
from corpora import recall_sets, sources, truth
from corpora.corpus import SHINGLE
from corpora.corpus import shingle_hashes as with_punctuation
from scrapy_zhdedup.similarity.sketch import shingle_hashes as word_shingles


def accepted_by_kind(corpus: str, n_base: int, lookalike_pairs: int, seed: int,
                     without_punctuation: bool = False) -> dict[str, tuple[int, int]]:
    """Per repost kind: (reposts the natural rule calls duplicates of their original, reposts)."""

    def overlap(a: str, b: str) -> tuple[float, float, int, int]:
        if without_punctuation:  # on the word characters, as cross_links tells its "punctuation" cause
            x, y = word_shingles(a, SHINGLE), word_shingles(b, SHINGLE)
        else:
            x, y = with_punctuation(a), with_punctuation(b)
        return (*truth.overlap(x, y), min(x.size, y.size), max(x.size, y.size))

    docs, _ = recall_sets.build_sets(corpus, n_base, lookalike_pairs, seed)["synthetic"]
    originals: dict[str, recall_sets.Doc] = {}
    accepted: Counter[str] = Counter()
    due: Counter[str] = Counter()
    for doc in docs:
        original = originals.setdefault(doc.group, doc)
        if original is doc:
            continue
        due[doc.kind] += 1
        accepted[doc.kind] += truth.is_duplicate(*overlap(recall_sets.clean_or_empty(original.text),
                                                          recall_sets.clean_or_empty(doc.text)))
    return {kind: (accepted[kind], due[kind]) for kind in sorted(due)}


def run(args: argparse.Namespace) -> Result:
    results = {corpus: accepted_by_kind(corpus, args.n_base, args.lookalike_pairs, args.seed, args.without_punctuation)
               for corpus in args.corpus}
    kinds = sorted({kind for by_kind in results.values() for kind in by_kind})
    printed = common.table(["kind", *args.corpus], [
        [kind, *(f"{a / n:.2f} ({a}/{n})" if (a, n) != (0, 0) else "-"
                 for a, n in (results[c].get(kind, (0, 0)) for c in args.corpus))] for kind in kinds])
    return Result(results, [printed])


def options(parser: argparse.ArgumentParser) -> None:
    corpus_option(parser, sources.LONG_CORPORA)
    parser.add_argument("--n-base", type=positive, default=600)
    parser.add_argument("--lookalike-pairs", type=int, default=60)
    parser.add_argument("--seed", type=int, default=recall_sets.SEED)
    parser.add_argument("--without-punctuation", action="store_true",
                        help="shingle the word characters only (the natural truth keeps punctuation)")


BENCHMARKS = (Benchmark("truth_on_synthetic", __doc__, run, options),)
