"""Ground truth for natural duplicates: every pair over a shingle-overlap threshold, found exactly.

A pair is a duplicate when the character 5-gram sets of the two texts have Jaccard ≥ 0.7, or
when ≥ 90 % of the smaller set is inside the larger (containment: a copy with a new headline,
a truncated copy), the smaller has at least 10 shingles and at least half as many as the larger
(a caption, a disclaimer or a stock clause is not a copy of the article that quotes it). Clusters
are the connected components of those pairs.

The join is exact, not LSH: both conditions imply an overlap of at least 0.7 × the smaller
set, so (prefix filtering, Chaudhuri et al. 2006) the smaller text x shares at least one of its
``|x| − ⌈0.7|x|⌉ + 1`` rarest shingles with the other text. Probing an inverted index of all
shingles with only those prefixes finds every qualifying pair; each candidate is then checked
on the full sets. Shingles are 32-bit hashes (``corpora.corpus.shingle_hashes``).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from corpora.corpus import shingle_hashes

JACCARD = 0.7
CONTAINMENT = 0.9
MIN_CONTAINED = 10  # containment counts only for a smaller text of at least this many shingles
MIN_SHARE = 0.5  # ... and at least this share of the larger text's
MIN_OVERLAP = min(JACCARD, CONTAINMENT)  # both conditions imply overlap >= this share of the smaller set


@dataclass(frozen=True)
class Pair:
    a: int
    b: int
    jaccard: float
    containment: float  # share of the smaller set inside the larger


def overlap(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """(Jaccard, containment of the smaller in the larger) of two sorted unique hash arrays."""
    inter = np.intersect1d(x, y, assume_unique=True).size
    union = x.size + y.size - inter
    return (inter / union if union else 1.0), (inter / min(x.size, y.size) if min(x.size, y.size) else 1.0)


def is_duplicate(jaccard: float, containment: float, smaller: int, larger: int) -> bool:
    return jaccard >= JACCARD or (containment >= CONTAINMENT and smaller >= MIN_CONTAINED
                                  and smaller >= MIN_SHARE * larger)


def duplicate_pairs(texts: list[str]) -> list[Pair]:
    """Every pair (a < b) of texts that are duplicates by the rule above, exactly."""
    sets = [shingle_hashes(t) for t in texts]
    sizes = np.array([s.size for s in sets])
    tokens = np.concatenate(sets)
    docs = np.repeat(np.arange(len(sets)), sizes)
    order = np.argsort(tokens, kind="stable")
    tokens, docs = tokens[order], docs[order]
    uniq, starts, counts = np.unique(tokens, return_index=True, return_counts=True)
    ends = starts + counts
    pairs: list[Pair] = []
    for x, xs in enumerate(sets):
        if xs.size == 0:
            continue
        prefix = xs.size - math.ceil(MIN_OVERLAP * xs.size - 1e-9) + 1
        at = np.searchsorted(uniq, xs)
        rare_first = at[np.lexsort((xs, counts[at]))[:prefix]]
        found = np.unique(np.concatenate([docs[starts[i] : ends[i]] for i in rare_first]))
        for y in found.tolist():  # x is the smaller of the pair (ties: the lower index)
            if y == x or sizes[y] < xs.size or (sizes[y] == xs.size and y < x):
                continue
            j, c = overlap(xs, sets[y])
            if is_duplicate(j, c, xs.size, sizes[y]):
                pairs.append(Pair(min(x, y), max(x, y), j, c))
    pairs.sort(key=lambda p: (p.a, p.b))
    return pairs


def clusters(n: int, pairs: list[Pair]) -> list[int]:
    """Cluster label per text (the smallest index of its connected component)."""
    parent = list(range(n))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for p in pairs:
        ra, rb = find(p.a), find(p.b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    return [find(i) for i in range(n)]


def cluster_sizes(labels: list[int]) -> dict[int, int]:
    sizes: dict[int, int] = defaultdict(int)
    for label in labels:
        sizes[label] += 1
    return dict(sizes)
