"""The ``zhdedup`` object every judged document carries in the index: its fields, written and read in one place.

:class:`Stored` is what the object holds; :meth:`Stored.to_source` writes it (a new document's, or
``dedup-index``'s partial update) and :meth:`Stored.from_source` reads it back from a ``_source``,
whole or as one of the include lists below left it.  Every module that writes, reads, queries or
sorts on the object goes through here: its field paths (:data:`STATUS`, :data:`CLUSTER` ...), the
``_source`` lists of each reader, the partial updates of ``reconcile`` (:func:`verdict_update`,
:func:`cluster_update`), and its mapping (:func:`dedup_properties`), so a field is named, encoded and mapped
once.

Encodings: the SimHash ``fp`` as 16 hex digits; the MinHash ``sketch`` as base64 (a ``binary``
field); its band keys (``mh``) and the passage keys as 8 hex digits; SimHash band keys under the
layout's field names (``b0`` ...), written only, as lookups query them.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from scrapy_zhdedup import __version__
from scrapy_zhdedup.index.bands import BandLayout
from scrapy_zhdedup.model import Features, Reason, Sketch, Status, Verdict
from scrapy_zhdedup.similarity.sketch import features_of

FIELD = "zhdedup"  # the object's name in every document; no item field may take it


def path(name: str) -> str:
    """The dotted path of one of the object's fields, as queries, sorts and aggregations name it."""
    return f"{FIELD}.{name}"


DOC_ID, STATUS, CLUSTER, SEEN_AT = path("doc_id"), path("status"), path("cluster"), path("seen_at")
SKETCH_KEYS, PASSAGES, WORDS, HASH = path("mh"), path("passages"), path("words"), path("hash")


@dataclass(frozen=True)
class Stored:
    """What a document's ``zhdedup`` object holds.  Read back through an include list (:func:`includes`:
    ``doc_id`` and ``cluster`` always), the fields it left out are None (or empty)."""

    doc_id: str
    cluster: str
    hash: str | None = None  # the content hash: a first copy's ``_id``
    status: Status | None = None
    dup_of: str | None = None
    distance: int | None = None
    similarity: float | None = None
    contained: float | None = None
    reason: Reason | None = None
    seen_at: str | None = None  # when it was judged (ISO 8601, milliseconds): the judgement order
    version: str | None = None  # of scrapy-zhdedup, that wrote it
    fp: int | None = None  # the SimHash (none for an exact repeat: never computed)
    sketch: Sketch | None = None  # verifies a candidate; with the keys below, only for a text not an exact repeat
    mh: tuple[str, ...] = ()  # the sketch's band keys, as stored (:func:`sketch_terms`)
    passages: tuple[int, ...] = ()  # passage keys, when passages are on
    words: str | None = None  # the text as jieba words, for search (chinese.py)

    @classmethod
    def of(cls, verdict: Verdict, seen_at: datetime, *, features: Features | None = None,
           words: str | None = None) -> Stored:
        """The object for ``verdict``; ``features`` are what later near lookups find and verify it by
        (:func:`query_features`), ``words`` its text segmented for search (chinese.py).

        Exact repeats have no features (they are never computed), so they get no key fields either:
        they are found by their hash, and leaving them out of the keys keeps a much-reposted text
        from swelling every later lookup's candidate list.
        """
        if seen_at.tzinfo is None:
            seen_at = seen_at.replace(tzinfo=timezone.utc)
        sketch, mh, passages = (None, (), ()) if features is None else (
            features.sketch, tuple(sketch_terms(features.sketch_keys)), tuple(features.passages))
        return cls(verdict.doc_id, verdict.cluster, verdict.content_hash, verdict.status, verdict.dup_of,
                   verdict.distance, verdict.similarity, verdict.contained, verdict.reason,
                   seen_at.isoformat(timespec="milliseconds"), __version__, verdict.fingerprint, sketch, mh,
                   passages, words)

    def to_source(self, layout: BandLayout) -> dict[str, Any]:
        """``{"zhdedup": {...}}``: the part of a document's ``_source`` (or of an ``update``'s ``doc``) this
        object is, with ``layout``'s SimHash band keys beside its sketch."""
        out: dict[str, Any] = {
            "hash": self.hash, "doc_id": self.doc_id, "status": self.status, "dup_of": self.dup_of,
            "cluster": self.cluster, "distance": self.distance, "similarity": self.similarity,
            "contained": self.contained, "reason": self.reason, "seen_at": self.seen_at, "version": self.version,
        }
        if self.fp is not None:
            out["fp"] = format(self.fp, "016x")
        if self.sketch is not None:
            if self.fp is not None:
                out.update(layout.terms(self.fp))
            out["sketch"] = base64.b64encode(self.sketch.to_bytes()).decode("ascii")
            out["mh"] = list(self.mh)
            if self.passages:
                out["passages"] = passage_terms(self.passages)
        if self.words:
            out["words"] = self.words
        return {FIELD: out}

    @classmethod
    def from_source(cls, source: Mapping[str, Any]) -> Stored | None:
        """The object in a document's ``_source`` (None when it has none: a document not judged yet).
        KeyError, TypeError or ValueError when it is damaged (no ``doc_id`` or ``cluster``, a sketch
        that does not decode)."""
        z = source.get(FIELD)
        if z is None:
            return None
        sketch = z.get("sketch")
        return cls(z["doc_id"], z["cluster"], z.get("hash"), z.get("status"), z.get("dup_of"), z.get("distance"),
                   z.get("similarity"), z.get("contained"), z.get("reason"), z.get("seen_at"), z.get("version"),
                   int(z["fp"], 16) if z.get("fp") else None,
                   None if sketch is None else Sketch.from_bytes(base64.b64decode(sketch)),
                   tuple(z.get("mh", ())), tuple(int(key, 16) for key in z.get("passages", ())), z.get("words"))

    def verdict(self) -> Verdict | None:
        """The verdict recorded here (None for an object written before it was kept, or not read)."""
        if self.status is None or self.hash is None:
            return None
        return Verdict(self.doc_id, self.status, self.dup_of, self.distance, self.cluster, self.hash, self.fp,
                       similarity=self.similarity, contained=self.contained, reason=self.reason)

    def features(self, passages: Sequence[int] | None = None) -> Features:
        """The features stored here, with ``passages`` (re-derived from the text) for the stored ones
        when given; ValueError when it has none (an exact repeat, or not read)."""
        if self.fp is None or self.sketch is None:
            raise ValueError(f"no features stored for {self.doc_id!r}")
        return features_of(self.fp, list(self.passages if passages is None else passages), self.sketch)


NAMES = frozenset(f.name for f in dataclasses.fields(Stored))


def includes(*names: str) -> list[str]:
    """A ``_source`` include list of these fields, and of ``doc_id`` and ``cluster``, which every reader
    gets (a misspelt name would silently read nothing: refused)."""
    unknown = set(names) - NAMES
    if unknown:
        raise ValueError(f"not fields of the zhdedup object: {', '.join(sorted(unknown))}")
    return [path(name) for name in dict.fromkeys(("doc_id", "cluster", *names))]


VERDICT = ("doc_id", "cluster", "status", "dup_of", "distance", "similarity", "contained", "reason")
NAMED = includes()  # who a document is, and its cluster
FIRST_COPY = includes(*VERDICT, "hash", "fp")  # the exact lookup: a first copy, and its own verdict for a rerun
CANDIDATE = includes("fp", "sketch", "seen_at")  # a near candidate, verified on its sketch
CANDIDATE_KEYS = [*CANDIDATE, SKETCH_KEYS]  # and its keys, to rank an unranked search's hits
SHOWN = includes(*VERDICT)  # a search hit (search.py)
REPORTED = includes(*VERDICT, "seen_at")  # the report's verdicts, in judgement order (report.py)
REJOINED = includes("status", "hash", "fp", "sketch", "passages")  # reconcile's self-join
WHOLE = [FIELD]  # dedup-index's loading of what was judged before


def verdict_update(verdict: Verdict) -> dict[str, Any]:
    """An ``update``'s ``doc``: the verdict fields replaced (reconcile marks a document a repeat), the rest kept."""
    return {FIELD: {"status": verdict.status, "dup_of": verdict.dup_of, "cluster": verdict.cluster,
                    "distance": verdict.distance, "similarity": verdict.similarity,
                    "contained": verdict.contained, "reason": verdict.reason}}


def cluster_update(cluster: str) -> dict[str, Any]:
    """An ``update``'s ``doc``: the document moved to ``cluster`` (its cluster head joined that one)."""
    return {FIELD: {"cluster": cluster}}


def named(source: Mapping[str, Any]) -> str | None:
    """The ``doc_id`` a document's object names, if it has one (whatever else it holds or lacks: a dead
    letter is filed under it and must never fail)."""
    z = source.get(FIELD)
    return z.get("doc_id") if isinstance(z, dict) else None


def item_fields(source: Mapping[str, Any]) -> dict[str, Any]:
    """A document's own fields: its ``_source`` without the ``zhdedup`` object."""
    return {key: value for key, value in source.items() if key != FIELD}


def sketch_terms(keys: Sequence[int]) -> list[str]:
    """Sketch band keys as stored in, and queried on, ``zhdedup.mh``."""
    return [format(key, "08x") for key in keys]


def passage_terms(keys: Sequence[int]) -> list[str]:
    """Passage keys as stored in, and queried on, ``zhdedup.passages``."""
    return [format(key, "08x") for key in keys]


def dedup_properties(layout: BandLayout) -> dict[str, Any]:
    """Mapping of the ``zhdedup`` object.  ``dynamic: strict`` turns a stray field into a visible error.

    Band, sketch-key (``mh``) and passage fields are only term-queried, so they keep no doc values;
    ``fp`` and ``sketch`` (the MinHash sketch that verifies a candidate) are only read back from
    ``_source``, so they are not indexed; ``cluster`` keeps doc values for ``collapse``; ``words`` is
    the text as jieba words (chinese.py), split on spaces only.
    """
    keyword = {"type": "keyword"}
    props: dict[str, Any] = {
        "fp": {"type": "keyword", "index": False},
        "hash": keyword, "doc_id": keyword, "status": keyword, "dup_of": keyword, "cluster": keyword,
        "distance": {"type": "integer"},
        "similarity": {"type": "half_float", "index": False},
        "contained": {"type": "half_float", "index": False},
        "reason": keyword,
        "seen_at": {"type": "date"},
        "version": keyword,
        "sketch": {"type": "binary"},
        "mh": {"type": "keyword", "doc_values": False},
        "passages": {"type": "keyword", "doc_values": False},
        "words": {"type": "text", "analyzer": "whitespace"},
    }
    for name in layout.field_names:
        props[name] = {"type": "keyword", "doc_values": False}
    return {FIELD: {"dynamic": "strict", "properties": props}}


MAX_QUERY_PASSAGES = 512  # passage keys used per document: bounded registry reads


def repeat_id(content_hash: str, doc_id: str) -> str:
    """``_id`` of an exact repeat kept in annotate mode (the first copy owns ``_id = content_hash``)."""
    return f"{content_hash}-{hashlib.sha1(doc_id.encode('utf-8')).hexdigest()[:16]}"


def query_features(features: Features) -> Features:
    """The features that stand for a document on Elasticsearch (a bounded number of passage keys)."""
    return features._replace(passages=query_passages(features.passages))


def query_passages(passages: Sequence[int]) -> list[int]:
    """The passage keys that stand for a document on Elasticsearch (bounded clause count)."""
    return list(passages[:MAX_QUERY_PASSAGES])
