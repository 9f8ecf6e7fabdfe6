"""The order several writers judged in, read back from an index: each stored document's place in the order
the key registry's claims define (backend/registry.py), which ``reconcile`` judges in and
benchmarks/es_writers.py compares one writer judging in it with.

An original's place is the smallest stamp its ``_id`` (its content hash, which it claims by) holds in the
registry; one that holds none (no registry, keys all boilerplate, claims that failed) takes the stamp
``fill`` gives it, from its ``seen_at``.  Any other document (a repeat: its claim never made, withdrawn
when it found an earlier original, or pruned once reconcile marked it) comes just after its ``seen_at``
(a stamp's leading milliseconds) and just after the document it names, so a cluster's head always comes
before its members.  A place is a string, smaller is earlier; ties go by doc id, then ``_id``; a document
without a ``seen_at`` (or a ``zhdedup`` object) comes last.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from elasticsearch import Elasticsearch

from ..backend.registry import OWNERS, _stamp_at
from ..index.template import registry_name
from .pointintime import PointInTime

PAGE = 5000
LAST = "~"  # after every stamp: a place without a moment


@dataclass(frozen=True, slots=True)
class Placed:
    """What a document's place depends on: its ``_id`` and doc id, its status, when it was judged
    (``seen_at``) and the doc id it repeats (``dup_of``)."""

    id: str
    doc_id: str
    status: str | None
    seen_at: str | None
    dup_of: str | None


def claim_stamps(client: Elasticsearch, index: str) -> dict[str, str]:
    """The smallest stamp each claimant (a document's ``_id``) holds over every key of ``index``'s
    registry; none without a registry."""
    name = registry_name(index)
    if not client.indices.exists(index=name):
        return {}
    stamps: dict[str, str] = {}
    body = {"size": PAGE, "_source": [OWNERS], "sort": [{"_shard_doc": "asc"}], "track_total_hits": False}
    with PointInTime(client, name, refresh=True) as reader:  # the registry is never refreshed otherwise
        for hits in reader.pages(body):
            for hit in hits:
                for digest, stamp in hit["_source"].get(OWNERS, ()):
                    stamps[digest] = min(stamp, stamps.get(digest, stamp))
    return stamps


def places(docs: Sequence[Placed], stamps: Mapping[str, str]) -> list[str]:
    """Each document's place (see the module's docstring), aligned with ``docs``."""
    row_of: dict[str, int] = {}
    for row, doc in enumerate(docs):
        row_of.setdefault(doc.doc_id, row)
    place: list[str | None] = [None] * len(docs)
    for start in range(len(docs)):
        chain: list[int] = []  # documents whose place follows the next one's
        row = start
        while place[row] is None:
            doc = docs[row]
            named = row_of.get(doc.dup_of) if doc.dup_of else None
            if doc.id in stamps:
                place[row] = stamps[doc.id]
            elif doc.status == "unique":
                place[row] = _stamp_at(doc.seen_at) if doc.seen_at else LAST
            elif named is None or named == row or named in chain:  # names nothing stored (or a cycle)
                place[row] = _after(doc.seen_at)
            else:
                chain.append(row)
                row = named
        for row in reversed(chain):
            doc = docs[row]
            place[row] = max(_after(doc.seen_at), f"{place[row_of[doc.dup_of or '']]}~")
    return [p or LAST for p in place]


def order(docs: Sequence[Placed], stamps: Mapping[str, str]) -> list[int]:
    """The positions of ``docs`` in the order they were judged in (by :func:`places`, ties by doc id, ``_id``)."""
    placed = places(docs, stamps)
    return sorted(range(len(docs)), key=lambda row: (placed[row], docs[row].doc_id, docs[row].id))


def _after(seen_at: str | None) -> str:
    """Just after every stamp taken in the millisecond of ``seen_at`` (and before the next)."""
    return f"{_stamp_at(seen_at)[:13]}.{LAST}" if seen_at else LAST
