"""Accuracy on labelled reposts: ours in each mode vs the ``simhash`` package, datasketch LSH and rensa LSH.

    python -m benchmarks accuracy [--n-base 1000] [--short-n-base 1000] [--jobs 2]

Data: ``corpora.corpus.build_accuracy_set`` — real news articles, 0-3 reposts of each
(header/footer added, punctuation width, character edits, dropped or swapped paragraph,
truncation, traditional script, and combinations), plus pairs of *different* articles in
the same site template or announcement boilerplate ("look-alikes", which must stay apart);
and ``build_short_set`` — the same edits on 60-180 character leads (microblog-sized).

Every method judges the documents in order, each against all before it, and names the
earlier document it repeats (the closest one where it has a notion of distance).  A
duplicate verdict is *correct* only if that document is in the same ground-truth group.
precision = correct / verdicts, recall = correct / true duplicates (documents with an earlier
member of their group).  "Look-alikes merged" counts look-alike documents called a duplicate
of anything; every one of those is a false merge.
"""

from __future__ import annotations

import argparse
import multiprocessing
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from benchmarks import common
from benchmarks.judges import Judge, minhash_lsh, ours, rensa_lsh, simhash_default, simhash_jieba
from benchmarks.runner import Benchmark, Result, positive
from corpora.corpus import DEFAULT_SEED, Record, build_accuracy_set, build_short_set
from corpora.reposts import TRANSFORMS

KINDS = tuple(TRANSFORMS)

LONG_METHODS: dict[str, Judge] = {
    "ours, default (sketch keys, sketch-verified)": ours(),
    "ours, features=words": ours(features="words"),
    "ours, features=chars n=2": ours(features="chars", shingle_size=2),
    "ours, features=chars n=3": ours(features="chars", shingle_size=3),
    "ours, passages on": ours(passages=True),
    "ours, similarity=0.75": ours(similarity=0.75),
    "ours, k=6": ours(threshold=6),
    "simhash default: Simhash(text), SimhashIndex(k=3)": simhash_default,
    "naive: jieba.lcut + Simhash, SimhashIndex(k=3)": simhash_jieba,
    "datasketch: 3-gram MinHashLSH(0.5)": minhash_lsh(3, 0.5),
    "datasketch: 3-gram MinHashLSH(0.7)": minhash_lsh(3, 0.7),
    "datasketch: 5-gram MinHashLSH(0.5)": minhash_lsh(5, 0.5),
    "datasketch: 5-gram MinHashLSH(0.7)": minhash_lsh(5, 0.7),
    "rensa: 3-gram RMinHashLSH(0.7)": rensa_lsh,
}
SHORT_METHODS: dict[str, Judge] = {
    "ours, default (auto → chars n=3 below 200 chars)": ours(),
    "ours, features=words": ours(features="words"),
    "ours, features=chars n=2": ours(features="chars", shingle_size=2),
    "ours, features=chars n=3": ours(features="chars", shingle_size=3),
    "ours, passages on": ours(passages=True),
    "ours, k=6": ours(threshold=6),
    "simhash default: Simhash(text), SimhashIndex(k=3)": simhash_default,
    "naive: jieba.lcut + Simhash, SimhashIndex(k=3)": simhash_jieba,
    "datasketch: 3-gram MinHashLSH(0.5)": minhash_lsh(3, 0.5),
    "datasketch: 3-gram MinHashLSH(0.7)": minhash_lsh(3, 0.7),
    "rensa: 3-gram RMinHashLSH(0.7)": rensa_lsh,
}


@dataclass
class Score:
    """Verdicts of one method on one set, split by the kind of the judged document."""

    n: Counter[str] = field(default_factory=Counter)  # documents per kind
    true_dups: Counter[str] = field(default_factory=Counter)
    predicted: Counter[str] = field(default_factory=Counter)
    correct: Counter[str] = field(default_factory=Counter)
    seconds: float = 0.0

    @property
    def precision(self) -> float:
        p = self.predicted.total()
        return self.correct.total() / p if p else 1.0

    @property
    def recall(self) -> float:
        t = self.true_dups.total()
        return self.correct.total() / t if t else 1.0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0

    def recall_of(self, kind: str) -> float | None:
        return self.correct[kind] / self.true_dups[kind] if self.true_dups[kind] else None

    def merged(self, kind: str) -> str:
        """Documents of a never-duplicate kind called a duplicate: 'count (share)'."""
        if not self.n[kind]:
            return "-"
        return f"{self.predicted[kind]} ({100 * self.predicted[kind] / self.n[kind]:.1f} %)"

    def as_dict(self) -> dict[str, Any]:
        return {"precision": self.precision, "recall": self.recall, "f1": self.f1, "seconds": self.seconds,
                "n": dict(self.n), "true_dups": dict(self.true_dups), "predicted": dict(self.predicted),
                "correct": dict(self.correct)}


def score(records: Sequence[Record], judge: Judge) -> Score:
    group_of = {r.id: r.group for r in records}
    seen_groups: set[str] = set()
    s = Score()
    t0 = time.perf_counter()
    verdicts = list(judge(records))
    s.seconds = time.perf_counter() - t0
    if len(verdicts) != len(records):
        raise AssertionError(f"judge gave {len(verdicts)} verdicts for {len(records)} records")
    for r, dup_of in zip(records, verdicts):
        s.n[r.kind] += 1
        if r.group in seen_groups:
            s.true_dups[r.kind] += 1
        if dup_of is not None:
            s.predicted[r.kind] += 1
            if group_of[dup_of] == r.group:
                s.correct[r.kind] += 1
        seen_groups.add(r.group)
    return s


# --- running the methods (two processes share the records through fork) --------------------

_SETS: dict[str, list[Record]] = {}


def _task(job: tuple[str, str]) -> tuple[str, str, Score]:
    set_name, method = job
    methods = LONG_METHODS if set_name == "long" else SHORT_METHODS
    return set_name, method, score(_SETS[set_name], methods[method])


def run_all(jobs: int) -> dict[str, dict[str, Score]]:
    tasks = [("long", m) for m in LONG_METHODS if _SETS.get("long")]
    tasks += [("short", m) for m in SHORT_METHODS if _SETS.get("short")]
    out: dict[str, dict[str, Score]] = {"long": {}, "short": {}}

    def note(set_name: str, method: str, s: Score) -> None:
        out[set_name][method] = s
        print(f"  [{set_name}] {method}: P={s.precision:.3f} R={s.recall:.3f} F1={s.f1:.3f} "
              f"({s.seconds:.0f} s)", flush=True)

    if jobs <= 1:
        for task in tasks:
            note(*_task(task))
    else:
        with multiprocessing.get_context("fork").Pool(jobs) as pool:
            for result in pool.imap_unordered(_task, tasks):
                note(*result)
    order = {"long": list(LONG_METHODS), "short": list(SHORT_METHODS)}
    return {k: {m: v[m] for m in order[k] if m in v} for k, v in out.items()}


def tables(scores: dict[str, dict[str, Score]], sets: dict[str, list[Record]]) -> list[str]:
    out = []
    if scores["long"]:
        long = sets["long"]
        kinds = Counter(r.kind for r in long)
        out.append(f"Long texts: {len(long):,} documents ({kinds['original']:,} originals, "
                   f"{sum(kinds[k] for k in KINDS):,} reposts, {kinds['lookalike']:,} look-alikes)\n"
                   + common.table(["method", "precision", "recall", "F1", "look-alikes merged", "originals merged",
                                   "docs/s"],
                                  [[m, f"{s.precision:.3f}", f"{s.recall:.3f}", f"{s.f1:.3f}", s.merged("lookalike"),
                                    s.merged("original"), common.rate(len(long), s.seconds)]
                                   for m, s in scores["long"].items()]))
        out.append("Recall by kind of repost edit (long texts)\n" + common.table(
            ["method", *KINDS],
            [[m, *(_pct(s.recall_of(k)) for k in KINDS)] for m, s in scores["long"].items()]))
    if scores["short"]:
        short = sets["short"]
        out.append(f"Short texts (60-180 chars): {len(short):,} documents\n" + common.table(
            ["method", "precision", "recall", "F1", "originals merged", *KINDS],
            [[m, f"{s.precision:.3f}", f"{s.recall:.3f}", f"{s.f1:.3f}", s.merged("original"),
              *(_pct(s.recall_of(k)) for k in KINDS)] for m, s in scores["short"].items()]))
    return out


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.0f} %"


def run(args: argparse.Namespace) -> Result:
    t0 = time.perf_counter()
    if args.n_base:
        _SETS["long"] = build_accuracy_set(args.n_base, args.seed)
    if args.short_n_base:
        _SETS["short"] = build_short_set(args.short_n_base, args.seed)
    print(f"sets built in {time.perf_counter() - t0:.0f} s: "
          + ", ".join(f"{k} {len(v):,} documents" for k, v in _SETS.items()) + "\n", flush=True)
    scores = run_all(args.jobs)
    return Result({k: {m: s.as_dict() for m, s in v.items()} for k, v in scores.items()}, tables(scores, _SETS),
                   ["docs/s: single process, while other methods ran on the other core; for speed see throughput."])


def options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--n-base", type=_count, default=1000, help="originals in the long-text set (0: skip it)")
    parser.add_argument("--short-n-base", type=_count, default=1000, help="originals in the short-text set (0: skip it)")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--jobs", type=positive, default=2, help="methods judged in parallel (default %(default)s)")


def _count(text: str) -> int:
    if int(text) < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, not {text}")
    return int(text)


BENCHMARKS = (Benchmark("accuracy", __doc__, run, options),)
