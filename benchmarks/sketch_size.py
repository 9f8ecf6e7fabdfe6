"""Which sketch size would let the rule's line move: ``bench_recall``'s sets judged with simulated sketches.

    python -m benchmarks.bench_sketch_size [--corpus inews reviews] [--sketch 64x16 128x8 256x8 exact]
        [--line 0.65/0.85 0.68/0.90]

The engine verifies each candidate on a 64-bin sketch (132 B a document); its estimates move verdicts
near the line both ways, which keeps the line low. Here every candidate is verified instead on what a
one-permutation MinHash of BINSxBITS would estimate (:class:`~benchmarks.exact_overlaps.SimulatedSketch`,
the engine's construction and estimator; ``64x16`` is the engine's own and gives its verdicts), or on
the exact overlap (``exact``), at each Jaccard / containment line. The candidates are the engine's.
Prints pairwise P/R/F1 per set, the two kinds with the lowest recall and look-alikes merged; writes
``benchmarks/results/sketch_size.json`` (``sketch_size-<corpora>-<sketches>.json`` for other corpora,
``sketch_size-<sketches>.json`` for other sketches). Choose on the tuning corpora (``inews``,
``reviews``), the default.
"""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Callable, Sequence
from typing import Any

from benchmarks import bench_recall, common
from benchmarks.exact_overlaps import ExactOverlaps, OverlapOf, SimulatedSketch, exact
from corpora import recall_sets, sources
from scrapy_zhdedup import DedupConfig


def overlap_of(spec: str) -> Callable[[], OverlapOf]:
    """``exact`` or ``BINSxBITS``: a fresh overlap function per judging run."""
    if spec == "exact":
        return lambda: exact
    bins, bits = (int(x) for x in spec.split("x"))
    SimulatedSketch(bins, bits)  # reject a bad size before any set is built
    return functools.partial(SimulatedSketch, bins, bits)


def line(spec: str) -> DedupConfig:
    similarity, containment = (float(x) for x in spec.split("/"))
    return DedupConfig(similarity=similarity, containment=containment)


def judged(docs: Sequence[recall_sets.Doc], pairs: Sequence[Any], config: DedupConfig,
           overlap: Callable[[], OverlapOf]) -> dict[str, Any]:
    score = bench_recall.score(docs, bench_recall.Ours(config, overlaps=lambda: ExactOverlaps(overlap=overlap())), pairs)
    kinds = sorted((score.recall_of(kind), kind) for kind in score.due if score.due[kind])
    return {"precision": score.precision, "recall": score.recall, "f1": score.f1,
            "lowest_kinds": {kind: recall for recall, kind in kinds[:2]}, "lookalikes_merged": score.lookalikes_merged}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_sketch_size", description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", nargs="+", default=list(sources.TUNING),
                        choices=[*sources.LONG_CORPORA, *sources.SHORT_CORPORA])
    parser.add_argument("--sketch", nargs="+", default=["64x16", "128x8", "256x8", "exact"],
                        help="BINSxBITS of a simulated sketch, or exact")
    parser.add_argument("--line", nargs="+", default=["0.65/0.85", "0.68/0.90"], help="JACCARD/CONTAINMENT")
    parser.add_argument("--seed", type=int, default=recall_sets.SEED)
    args = parser.parse_args(argv)
    sketches = {spec: overlap_of(spec) for spec in args.sketch}
    lines = {spec: line(spec) for spec in args.line}
    info = common.start("Verification on simulated sketch sizes (bench_recall's sets, the engine's candidates)")
    results: dict[str, Any] = {}
    rows = []
    for corpus in args.corpus:
        sets = recall_sets.build_sets(corpus, 600, 60, args.seed)
        for sketch, overlap in sketches.items():
            for line_spec, config in lines.items():
                r = results.setdefault(corpus, {}).setdefault(sketch, {})[line_spec] = {
                    name: judged(docs, pairs, config, overlap) for name, (docs, pairs) in sets.items()}
                cells = [f"{s['precision']:.3f} / {s['recall']:.3f} / {s['f1']:.3f}; "
                         + ", ".join(f"{k} {v:.2f}" for k, v in s["lowest_kinds"].items())
                         + (f"; {s['lookalikes_merged']} merged" if s["lookalikes_merged"] else "")
                         for s in r.values()]
                rows.append([corpus, sketch, line_spec, *cells])
                print(f"  {corpus} {sketch} {line_spec}: {' | '.join(cells)}", flush=True)
    printed = common.table(["corpus", "sketch", "line", "synthetic P / R / F1; lowest kinds",
                            "natural P / R / F1; lowest kinds"], rows)
    print("\n" + printed)
    # Another choice of corpora or sketches (a held-out corpus above all) gets its own file.
    chosen = [*args.corpus, *args.sketch] if args.corpus != parser.get_default("corpus") else [
        *(args.sketch if args.sketch != parser.get_default("sketch") else [])]
    common.write_results("-".join(["sketch_size", *chosen]), info, vars(args), results, [printed])
    return 0


if __name__ == "__main__":
    sys.exit(main())
