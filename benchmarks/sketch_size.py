"""Which sketch size would let the rule's line move: the ``recall`` sets judged with simulated sketches.

    python -m benchmarks sketch_size [--corpus inews reviews] [--sketch 64x16 128x8 256x8 exact]
        [--line 0.65/0.85 0.68/0.90]

The engine verifies each candidate on a 64-bin sketch (132 B a document); its estimates move verdicts
near the line both ways, which keeps the line low. Here every candidate is verified instead on what a
one-permutation MinHash of BINSxBITS would estimate (:class:`~benchmarks.exact_overlaps.SimulatedSketch`,
the engine's construction and estimator; ``64x16`` is the engine's own and gives its verdicts), or on
the exact overlap (``exact``), at each Jaccard / containment line. The candidates are the engine's.
Prints pairwise P/R/F1 per set, the two kinds with the lowest recall and look-alikes merged. Choose on
the tuning corpora (``inews``, ``reviews``), the default.
"""

from __future__ import annotations

import argparse
import functools
from collections.abc import Callable, Sequence
from typing import Any

from benchmarks import common, exact_overlaps, recall
from benchmarks.exact_overlaps import ExactOverlaps, OverlapOf, SimulatedSketch, exact
from benchmarks.runner import Benchmark, Result, corpus_option
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
    score = recall.score(docs, recall.Ours(config, overlaps=lambda: ExactOverlaps(overlap=overlap())), pairs)
    kinds = sorted((score.recall_of(kind), kind) for kind in score.due if score.due[kind])
    return {"precision": score.precision, "recall": score.recall, "f1": score.f1,
            "lowest_kinds": {kind: recall for recall, kind in kinds[:2]}, "lookalikes_merged": score.lookalikes_merged}


def run(args: argparse.Namespace) -> Result:
    sketches = {spec: overlap_of(spec) for spec in args.sketch}
    lines = {spec: line(spec) for spec in args.line}
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
    return Result(results, [common.table(["corpus", "sketch", "line", "synthetic P / R / F1; lowest kinds",
                                           "natural P / R / F1; lowest kinds"], rows)])


def options(parser: argparse.ArgumentParser) -> None:
    corpus_option(parser, sources.TUNING)
    parser.add_argument("--sketch", nargs="+", type=_sketch, default=["64x16", "128x8", "256x8", "exact"],
                        help="BINSxBITS of a simulated sketch, or exact")
    parser.add_argument("--line", nargs="+", type=_line, default=["0.65/0.85", "0.68/0.90"], help="JACCARD/CONTAINMENT")
    parser.add_argument("--seed", type=int, default=recall_sets.SEED)


def _sketch(spec: str) -> str:
    try:
        overlap_of(spec)  # reject a bad size before any set is built
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return spec


def _line(spec: str) -> str:
    try:
        line(spec)
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"{spec}: {e}") from None
    return spec


BENCHMARKS = (Benchmark("sketch_size", __doc__, run, options, check=exact_overlaps.check),)
