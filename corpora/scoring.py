"""A run's ``dup_of`` links scored against a labelled set: pairwise over clusters, and the links that
join a text to one it mostly does not contain.

A run names, per document in arrival order, the earlier document it repeats or none.  Its predicted
clusters are the connected components of those links; a set's true clusters are its ``group`` labels.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from math import comb

import numpy as np

from corpora import truth
from corpora.recall_sets import Doc
from scrapy_zhdedup.similarity.sketch import shingle_hashes


def predicted_clusters(docs: Sequence[Doc], links: Sequence[str | None]) -> list[int]:
    """Connected components of the dup_of links (label = index of the component's first document)."""
    index = {d.id: i for i, d in enumerate(docs)}
    pairs = [truth.Pair(index[target], i, 1.0, 1.0) for i, target in enumerate(links) if target is not None]
    return truth.clusters(len(docs), pairs)


def pairwise(pred: Sequence[int], gold: Sequence[str] | Sequence[int]) -> tuple[float, float, float]:
    """Precision, recall and F1 over all unordered pairs: a pair is predicted when both documents are in
    one predicted cluster, true when both are in one group."""
    both = Counter(zip(pred, gold))
    tp = sum(comb(n, 2) for n in both.values())
    predicted = sum(comb(n, 2) for n in Counter(pred).values())
    true = sum(comb(n, 2) for n in Counter(gold).values())
    p = tp / predicted if predicted else 1.0
    r = tp / true if true else 1.0
    return p, r, (2 * p * r / (p + r) if p + r else 0.0)


def mostly_new(docs: Sequence[Doc], links: Sequence[str | None]) -> int:
    """Links whose later text has more than half of its shingles (the engine's normalised 4-grams) absent
    from its ``dup_of``, counted exactly: each is an article ``drop`` mode would delete although it is new."""
    row = {d.id: i for i, d in enumerate(docs)}
    count = 0
    for doc, target in zip(docs, links):
        if target is None:
            continue
        mine, theirs = shingle_hashes(doc.text), shingle_hashes(docs[row[target]].text)
        count += int(np.isin(mine, theirs, assume_unique=True).sum() < 0.5 * mine.size)
    return count
