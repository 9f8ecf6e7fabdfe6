"""Recall on edited, re-templated, natural and short duplicates (issue 10), every method in one run.

    python -m benchmarks recall [--corpus inews pd1998 reviews clauses poems] [--n-base 600]
        [--method defaults MinHashLSH] [--set synthetic]

Corpora (``corpora.sources`` says which are tuned on and which held out). Sets per corpus
(``corpora.recall_sets``): long
corpora get ``synthetic`` (reposts incl. re-templated portal pages, plus look-alikes) and
``natural`` (the whole corpus, exact-join ground truth); short corpora get ``synthetic``
(20–200 character texts with one-character, prefix, suffix and punctuation edits) and ``natural``.

Every method reads the documents in order and names, per document, the earlier document it
repeats (``dup_of``) or none. Scores:

- **pairwise P/R/F1**: predicted clusters are the connected components of the ``dup_of`` links,
  true clusters the ground-truth groups. A pair of documents is predicted when both are in one
  predicted cluster, true when both are in one group; P = |predicted ∩ true| / |predicted|,
  R = |predicted ∩ true| / |true|, over all unordered pairs.
- **recall by kind**: a document with an earlier member of its group is found when its
  ``dup_of`` is in its group.
- **recall by similarity band** (natural): share of true pairs, binned by their 5-gram Jaccard,
  that end up in one predicted cluster.
- **look-alikes merged**: look-alike documents whose predicted cluster holds another group.
- **mostly new** (issue 31's invariant): links whose later text has more than half of its
  normalised shingles (the engine's 4-grams of word characters) absent from the text it is said to
  repeat, counted exactly: each is an article that ``drop`` mode would delete although it is new.
- **word-character truth** (natural): P/R/F1 again against the same join on word characters only
  (``recall_sets.word_groups``: punctuation-only variants are one text to a reader).
- **largest clusters** (natural, the engine's defaults): the three largest predicted clusters, how
  many true groups each holds and the start of its first members, to read by eye.

Scores are ``corpora.scoring``'s. docs/s is the
judging alone (sets are built before; each method first judges a few documents untimed, so its
one-time start-up is left out: :func:`warm_up`) per second of this process's CPU time (every method
is single-threaded; wall time on the shared cores would measure the neighbours), same run, same data.
"""

from __future__ import annotations

import argparse
import contextlib
import random
import statistics
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from benchmarks import common, exact_overlaps
from benchmarks.exact_overlaps import ExactOverlaps
from benchmarks.judges import minhash_lsh, rensa_lsh, simhash_jieba
from benchmarks.runner import Benchmark, Result, corpus_option, positive
from benchmarks.store_bytes import store_bytes
from corpora import recall_sets, sources, truth
from corpora.recall_sets import Doc, build_sets
from corpora.scoring import mostly_new, pairwise, predicted_clusters
from scrapy_zhdedup import DedupConfig, Deduper
from scrapy_zhdedup.errors import EmptyTextError

Judge = Callable[[Sequence[Doc]], Iterator[str | None]]
HOST_LINE_PAGES = 3
WARM_UP = 20


class HostLines:
    """Streaming per-host line filter: a line that ``pages`` earlier pages of the same host already
    had is site furniture (menus, promotions, disclaimers that leaked through extraction)."""

    def __init__(self, pages: int = HOST_LINE_PAGES) -> None:
        self.pages = pages
        self._seen: dict[str, Counter[str]] = defaultdict(Counter)

    def __call__(self, doc: Doc) -> str:
        if not doc.host:
            return doc.text
        lines = doc.text.split("\n")
        seen = self._seen[doc.host]
        kept = [line for line in lines if seen[line] < self.pages]
        seen.update(set(lines))
        return "\n".join(kept) if kept else doc.text


class Ours:
    """The engine as ``zhdedup scan`` runs it (embedded store, in order); keeps the store's bytes per
    indexed document by part, as ``EmbeddedStore.nbytes`` counts them.  ``overlaps``: a fresh
    :class:`ExactOverlaps` per run verifies instead of the sketches (exact_overlaps.py)."""

    def __init__(self, config: DedupConfig | None = None, host_lines: bool = False,
                 overlaps: Callable[[], ExactOverlaps] | None = None) -> None:
        self.config, self.host_lines, self.overlaps = config or DedupConfig(), host_lines, overlaps
        self.bytes_per_doc: dict[str, float] = {}

    def __call__(self, docs: Sequence[Doc]) -> Iterator[str | None]:
        deduper = Deduper(self.config)
        host_lines = HostLines() if self.host_lines else None
        with self.overlaps().patched() if self.overlaps else contextlib.nullcontext():
            for doc in docs:
                try:
                    verdict = deduper.judge(doc.id, text=host_lines(doc) if host_lines else doc.text)
                except EmptyTextError:
                    yield None
                    continue
                yield verdict.dup_of
        near = deduper.store._rows.near
        for table in (near.bands._table, near.sketch_keys, near.passages):
            table.compact()  # merge the insertion buffers, as a long-running store does
        n = max(1, len(deduper.store))
        self.bytes_per_doc = {part: size / n for part, size in store_bytes(deduper.store).items() if part != "bloom"}


DEFAULTS = "zhdedup scan defaults"


def methods() -> dict[str, Judge]:
    """Fresh judges (each keeps its own memory figures): ours, its variants, the peers."""
    return {
        DEFAULTS: Ours(),
        "ours, passages on": Ours(DedupConfig(passages=True)),
        "ours, SimHash bands on": Ours(DedupConfig(simhash_bands=True)),
        "ours + per-host repeated lines removed": Ours(host_lines=True),
        "ours on exact overlaps (no sketch error)": Ours(overlaps=ExactOverlaps),
        "simhash: jieba words, SimhashIndex(k=3)": simhash_jieba,
        "datasketch: 3-gram MinHashLSH(0.5)": minhash_lsh(3, 0.5),
        "datasketch: 3-gram MinHashLSH(0.7)": minhash_lsh(3, 0.7),
        "rensa: 3-gram RMinHashLSH(0.7)": rensa_lsh,
    }


BANDS = ((0.0, 0.7, "C ≥ 0.9, J < 0.7"), (0.7, 0.8, "J 0.7–0.8"), (0.8, 0.9, "J 0.8–0.9"),
         (0.9, 1.0, "J 0.9–1.0"), (1.0, 1.01, "J = 1"))


@dataclass
class Score:
    precision: float
    recall: float
    f1: float
    docs_per_s: float
    found: Counter[str] = field(default_factory=Counter)  # per kind: duplicates found
    due: Counter[str] = field(default_factory=Counter)  # per kind: documents with an earlier group member
    bands: dict[str, tuple[int, int]] = field(default_factory=dict)  # band -> (pairs joined, pairs)
    lookalikes_merged: int = 0
    mostly_new: int = 0  # links whose later text is mostly absent from the text it is said to repeat
    words: tuple[float, float, float] | None = None  # P/R/F1 against the word-character truth (natural)
    largest: list[dict[str, Any]] = field(default_factory=list)  # the three largest predicted clusters
    bytes_per_doc: dict[str, float] = field(default_factory=dict)  # ours only: store memory by part

    def recall_of(self, kind: str) -> float | None:
        return self.found[kind] / self.due[kind] if self.due[kind] else None

    def as_dict(self) -> dict[str, Any]:
        return {"precision": self.precision, "recall": self.recall, "f1": self.f1, "docs_per_s": self.docs_per_s,
                "recall_by_kind": {k: self.recall_of(k) for k in self.due}, "found": dict(self.found),
                "due": dict(self.due), "bands": self.bands, "lookalikes_merged": self.lookalikes_merged,
                "mostly_new": self.mostly_new, "word_truth": self.words, "largest": self.largest,
                "bytes_per_doc": self.bytes_per_doc}






def warm_up(docs: Sequence[Doc]) -> list[Doc]:
    """What every method judges, untimed, before its timed run: the first ``WARM_UP`` documents and
    the longest one.  Its one-time start-up (imports, jieba's dictionary, the IDF table: ~0.3 s for
    ours, more for jieba) is not a per-document cost, and fell on whichever set a process ran first."""
    return [*docs[:WARM_UP], max(docs, key=lambda d: len(d.text))]




def largest_clusters(docs: Sequence[Doc], pred: Sequence[int], n: int = 3, shown: int = 4) -> list[dict[str, Any]]:
    """The ``n`` largest predicted clusters: size, true groups inside, and their first members' starts."""
    members: dict[int, list[int]] = defaultdict(list)
    for i, c in enumerate(pred):
        members[c].append(i)
    out = []
    for cluster in sorted(members, key=lambda c: (-len(members[c]), c))[:n]:
        rows = members[cluster]
        out.append({"size": len(rows), "true_groups": len({docs[i].group for i in rows}),
                    "members": [docs[i].text[:40].replace("\n", " ") for i in rows[:shown]]})
    return out


def score(docs: Sequence[Doc], judge: Judge, pairs: Sequence[truth.Pair] = (),
          word_labels: Sequence[int] | None = None) -> Score:
    for _ in judge(warm_up(docs)):  # every judge starts from fresh state on each call
        pass
    t0 = time.process_time()  # CPU time: the cores are shared, wall time would measure the neighbours
    links = list(judge(docs))
    seconds = time.process_time() - t0
    group_of = {d.id: d.group for d in docs}
    pred = predicted_clusters(docs, links)
    p, r, f1 = pairwise(pred, [d.group for d in docs])
    s = Score(p, r, f1, len(docs) / seconds if seconds else 0.0)
    if isinstance(judge, Ours):
        s.bytes_per_doc = dict(judge.bytes_per_doc)
    s.mostly_new = mostly_new(docs, links)
    if word_labels is not None:
        s.words = pairwise(pred, word_labels)
        s.largest = largest_clusters(docs, pred)
    seen: set[str] = set()
    for d, target in zip(docs, links):
        if d.group in seen:
            s.due[d.kind] += 1
            if target is not None and group_of[target] == d.group:
                s.found[d.kind] += 1
        seen.add(d.group)
    for lo, hi, name in BANDS:
        band = [q for q in pairs if lo <= q.jaccard < hi]
        s.bands[name] = (sum(pred[q.a] == pred[q.b] for q in band), len(band))
    groups_in: dict[int, set[str]] = defaultdict(set)
    for d, c in zip(docs, pred):
        groups_in[c].add(d.group)
    s.lookalikes_merged = sum(1 for d, c in zip(docs, pred) if d.kind.startswith("lookalike") and len(groups_in[c]) > 1)
    return s


# --- sets ---------------------------------------------------------------------------------------




def spot_check(docs: Sequence[Doc], pairs: Sequence[truth.Pair], n: int, seed: int) -> list[str]:
    """``n`` random true pairs nearest the decision boundary (lowest Jaccard), for reading by eye."""
    near = sorted(pairs, key=lambda p: max(p.jaccard - truth.JACCARD, p.containment - truth.CONTAINMENT))[: 5 * n]
    picked = random.Random(seed).sample(near, min(n, len(near)))
    return [f"J={p.jaccard:.2f} C={p.containment:.2f}\n  A: {docs[p.a].text[:120]!r}\n  B: {docs[p.b].text[:120]!r}"
            for p in picked]


# --- reporting ------------------------------------------------------------------------------------


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.0f} %"


def _bytes(parts: dict[str, float], names: tuple[str, ...]) -> str:
    return f"{sum(parts[n] for n in names):.0f}" if parts else "-"


def tables(corpus: str, set_name: str, docs: Sequence[Doc], scores: dict[str, Score]) -> list[str]:
    kinds = sorted({k for s in scores.values() for k in s.due}, key=lambda k: (k != "natural", k))
    n_dups = sum(next(iter(scores.values())).due.values())
    head = f"{corpus} / {set_name}: {len(docs):,} documents, {n_dups:,} with an earlier duplicate"
    words = ["P / R / F1, word-character truth"] if any(s.words for s in scores.values()) else []
    out = [head + "\n" + common.table(
        ["method", "precision", "recall", "F1", *words, "mostly new", "look-alikes merged", "docs/s",
         "sketch+keys B/doc", "store B/doc"],
        [[m, f"{s.precision:.3f}", f"{s.recall:.3f}", f"{s.f1:.3f}",
          *([" / ".join(f"{x:.3f}" for x in s.words)] if s.words else [] if not words else ["-"]),
          s.mostly_new, s.lookalikes_merged, f"{s.docs_per_s:.0f}",
          _bytes(s.bytes_per_doc, ("sketches", "sketch_keys")), _bytes(s.bytes_per_doc, tuple(s.bytes_per_doc))]
         for m, s in scores.items()])]
    out.append(f"{corpus} / {set_name}: recall by kind\n" + common.table(
        ["method", *kinds], [[m, *(_pct(s.recall_of(k)) for k in kinds)] for m, s in scores.items()]))
    if any(total for s in scores.values() for _, total in s.bands.values()):
        names = [name for _, _, name in BANDS]
        first = next(iter(scores.values()))
        out.append(f"{corpus} / {set_name}: recall of true pairs by 5-gram similarity band\n" + common.table(
            ["method", *(f"{n} ({first.bands[n][1]})" for n in names)],
            [[m, *(_pct(s.bands[n][0] / s.bands[n][1] if s.bands[n][1] else None) for n in names)]
             for m, s in scores.items()]))
    return out


def run_corpus(corpus: str, n_base: int, lookalike_pairs: int, seed: int,
               methods: Callable[[], dict[str, Judge]], only: Sequence[str] = ()) -> dict[str, Any]:
    t0 = time.perf_counter()
    sets = {name: s for name, s in build_sets(corpus, n_base, lookalike_pairs, seed).items()
            if not only or name in only}
    print(f"{corpus}: sets built in {time.perf_counter() - t0:.0f} s", flush=True)
    result: dict[str, Any] = {"role": "tuning" if corpus in sources.TUNING else "held out", "sets": {}}
    printed: list[str] = []
    for set_name, (docs, pairs) in sets.items():
        scores: dict[str, Score] = {}
        word_labels = recall_sets.word_groups(docs) if set_name == "natural" else None
        for method, judge in methods().items():
            scores[method] = s = score(docs, judge, pairs, word_labels)
            print(f"  [{corpus}/{set_name}] {method}: P={s.precision:.3f} R={s.recall:.3f} F1={s.f1:.3f} "
                  f"{s.docs_per_s:.0f} docs/s", flush=True)
        furniture = [d.furniture for d in docs if d.host and d.kind.startswith("retemplate")]
        host_lines = HostLines()
        removed = [1 - len(host_lines(d)) / len(d.text) for d in docs]
        removed = [r for r, d in zip(removed, docs) if d.host and d.kind.startswith("retemplate")]
        entry: dict[str, Any] = {"documents": len(docs), "kinds": dict(Counter(d.kind for d in docs)),
                                 "true_pairs": len(pairs), "scores": {m: s.as_dict() for m, s in scores.items()}}
        if furniture:
            entry["furniture_share"] = {"mean": statistics.mean(furniture), "max": max(furniture),
                                        "removed_by_host_lines": statistics.mean(removed)}
            printed.append(f"{corpus}: site furniture in re-templated pages after extraction: "
                           f"{100 * statistics.mean(furniture):.1f} % of characters on average, "
                           f"{100 * max(furniture):.1f} % at most; the per-host repeated-line filter "
                           f"removes {100 * statistics.mean(removed):.1f} % of their characters")
        if pairs:
            entry["spot_check"] = spot_check(docs, pairs, 10, seed)
        for method, s in scores.items():
            if s.largest and method == DEFAULTS:
                printed.append(f"{corpus} / {set_name}: largest clusters ({method})\n" + "\n".join(
                    f"- {c['size']} documents, {c['true_groups']} true group(s): " + " | ".join(c["members"])
                    for c in s.largest))
        result["sets"][set_name] = entry
        printed += tables(corpus, set_name, docs, scores)
    result["printed"] = printed
    return result


def run(args: argparse.Namespace) -> Result:
    def chosen() -> dict[str, Judge]:
        return {m: j for m, j in methods().items() if not args.method or any(s in m for s in args.method)}

    results: dict[str, Any] = {}
    tables: list[str] = []
    notes: list[str] = []
    for corpus in args.corpus:
        result = run_corpus(corpus, args.n_base, args.lookalike_pairs, args.seed, chosen, args.set or ())
        results[corpus] = {"role": result["role"], "sets": result["sets"]}
        tables += result["printed"]
        notes += [f"[{corpus}/{set_name} spot check] {line}" for set_name, entry in result["sets"].items()
                  for line in entry.get("spot_check", [])]
    return Result(results, tables, notes)


def options(parser: argparse.ArgumentParser) -> None:
    corpus_option(parser)
    parser.add_argument("--n-base", type=positive, default=600, help="synthetic originals per corpus")
    parser.add_argument("--lookalike-pairs", type=int, default=60)
    parser.add_argument("--seed", type=int, default=recall_sets.SEED)
    parser.add_argument("--method", nargs="*", help="substrings of method names to run (default: all)")
    parser.add_argument("--set", nargs="*", choices=("synthetic", "natural"),
                        help="sets to judge (default: both; synthetic alone is the quick cost A/B)")


BENCHMARKS = (Benchmark("recall", __doc__, run, options, check=exact_overlaps.check),)
