"""The methods every quality and speed comparison runs side by side: ours, the ``simhash`` package,
datasketch's MinHash LSH and rensa's (rensa_scan.py), each as a judge.

A judge reads documents (anything with an ``id`` and a ``text``) in arrival order and yields, per
document, the id of the earlier document it repeats, or None.  Where a method has a notion of distance
it names the closest candidate (oldest on ties), as ours names its best match.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol

from benchmarks import rensa_scan
from scrapy_zhdedup.config import DedupConfig
from scrapy_zhdedup.deduper import Deduper
from scrapy_zhdedup.errors import EmptyTextError

NUM_PERM = 128


class Text(Protocol):
    @property
    def id(self) -> str: ...

    @property
    def text(self) -> str: ...


Judge = Callable[[Sequence[Text]], Iterator[str | None]]


def ours(**options: Any) -> Judge:
    """The engine with these ``DedupConfig`` options, embedded store, a fresh one per call."""
    config = DedupConfig(**options)

    def judge(docs: Sequence[Text]) -> Iterator[str | None]:
        deduper = Deduper(config)
        for doc in docs:
            try:
                verdict = deduper.judge(doc.id, text=doc.text)
            except EmptyTextError:
                yield None
                continue
            yield verdict.dup_of

    return judge


def _closest_simhash(index: Any, fp: Any, values: dict[str, int], order: dict[str, int]) -> str | None:
    found = index.get_near_dups(fp)
    if not found:
        return None
    return min(found, key=lambda i: (bin(values[i] ^ fp.value).count("1"), order[i]))


def simhash_default(docs: Sequence[Text]) -> Iterator[str | None]:
    """The package used as documented: ``Simhash(text)`` (its 4-character tokenizer), k=3."""
    from simhash import Simhash, SimhashIndex

    index, values, order = SimhashIndex([], k=3), dict[str, int](), dict[str, int]()
    for n, doc in enumerate(docs):
        fp = Simhash(doc.text)
        yield _closest_simhash(index, fp, values, order)
        index.add(doc.id, fp)
        values[doc.id], order[doc.id] = fp.value, n


def simhash_jieba(docs: Sequence[Text]) -> Iterator[str | None]:
    """The usual first attempt ("naive"): ``jieba.lcut`` tokens, unweighted, ``SimhashIndex(k=3)``."""
    import jieba
    from simhash import Simhash, SimhashIndex

    index, values, order = SimhashIndex([], k=3), dict[str, int](), dict[str, int]()
    for n, doc in enumerate(docs):
        fp = Simhash(jieba.lcut(doc.text))
        yield _closest_simhash(index, fp, values, order)
        index.add(doc.id, fp)
        values[doc.id], order[doc.id] = fp.value, n


def minhash_lsh(shingle: int, threshold: float) -> Judge:
    """datasketch: character ``shingle``-grams, 128 permutations, MinHashLSH at ``threshold`` (query, then
    insert); of the candidates, the one with the highest estimated Jaccard (oldest on ties)."""

    def judge(docs: Sequence[Text]) -> Iterator[str | None]:
        from datasketch import MinHash, MinHashLSH

        lsh = MinHashLSH(threshold=threshold, num_perm=NUM_PERM)
        seen: dict[str, tuple[int, MinHash]] = {}
        for n, doc in enumerate(docs):
            text = doc.text
            m = MinHash(num_perm=NUM_PERM)
            m.update_batch([g.encode("utf-8") for g in {text[i : i + shingle] for i in range(max(1, len(text) - shingle + 1))}])
            found = lsh.query(m)
            yield min(found, key=lambda i: (-m.jaccard(seen[i][1]), seen[i][0])) if found else None
            lsh.insert(doc.id, m)
            seen[doc.id] = (n, m)

    return judge


def rensa_lsh(docs: Sequence[Text]) -> Iterator[str | None]:
    """rensa: character 3-grams, ``RMinHash(128)``, ``RMinHashLSH(0.7)``; the most similar candidate (rensa_scan.py)."""
    return rensa_scan.judge((doc.id, doc.text) for doc in docs)
