"""Do issue 10's two ground truths agree?  The natural sets' rule applied to the synthetic reposts.

    python -m benchmarks.bench_truth_on_synthetic [--corpus inews pd1998]

``bench_recall`` scores natural duplicates against an exact rule (character 5-grams with the
punctuation kept: Jaccard ≥ 0.7, or containment ≥ 0.9 of a smaller text of ≥ 10 shingles) and the
synthetic sets against how each repost was made (every repost of an article is its duplicate).
Here every synthetic repost is checked against its original by the natural sets' rule, both texts
cleaned by the engine's ``TextCleaner`` first (NFKC and t2s, so width and script changes do not
count against it), and the share that rule calls duplicates is printed by kind.  A kind that rule
mostly rejects cannot reach the synthetic recall target by a method that also reaches the natural
precision target by agreeing with that rule.  Writes ``benchmarks/results/truth_on_synthetic.json``.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Sequence

from benchmarks import bench_recall, common, recall_sets, sources, truth
from benchmarks.corpus import shingle_hashes


def accepted_by_kind(corpus: str, n_base: int, lookalike_pairs: int, seed: int) -> dict[str, tuple[int, int]]:
    """Per repost kind: (reposts the natural rule calls duplicates of their original, reposts)."""
    docs, _ = bench_recall.build_sets(corpus, n_base, lookalike_pairs, seed)["synthetic"]
    originals: dict[str, recall_sets.Doc] = {}
    accepted: Counter[str] = Counter()
    due: Counter[str] = Counter()
    for doc in docs:
        original = originals.setdefault(doc.group, doc)
        if original is doc:
            continue
        a = shingle_hashes(recall_sets.clean_or_empty(original.text))
        b = shingle_hashes(recall_sets.clean_or_empty(doc.text))
        jaccard, containment = truth.overlap(a, b)
        due[doc.kind] += 1
        accepted[doc.kind] += truth.is_duplicate(jaccard, containment, min(a.size, b.size))
    return {kind: (accepted[kind], due[kind]) for kind in sorted(due)}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", nargs="+", default=list(sources.LONG_CORPORA), choices=sources.LONG_CORPORA)
    parser.add_argument("--n-base", type=int, default=600)
    parser.add_argument("--lookalike-pairs", type=int, default=60)
    parser.add_argument("--seed", type=int, default=recall_sets.SEED)
    args = parser.parse_args(argv)
    info = common.start("The natural sets' rule (5-gram J ≥ 0.7 or containment ≥ 0.9) on the synthetic reposts")
    results = {corpus: accepted_by_kind(corpus, args.n_base, args.lookalike_pairs, args.seed) for corpus in args.corpus}
    kinds = sorted({kind for by_kind in results.values() for kind in by_kind})
    printed = common.table(["kind", *args.corpus], [
        [kind, *(f"{a / n:.2f} ({a}/{n})" if (a, n) != (0, 0) else "-"
                 for a, n in (results[c].get(kind, (0, 0)) for c in args.corpus))] for kind in kinds])
    print(printed)
    common.write_results("truth_on_synthetic", info, vars(args), results, [printed])
    return 0


if __name__ == "__main__":
    sys.exit(main())
