"""What the engine remembers of the documents it judged, in this process: the
:class:`~scrapy_zhdedup.judge.Store` over compact numpy tables.

Per stored document (a row, rows.py) the near index, a prefix of the content hash and its cluster's
first row; per judged document (an entry, entries.py; exact repeats included) its id, content hash and
verdict, so a rerun can answer an id it has judged before.  Every change is one :class:`Record`
(record.py).  The embedded store (``store/embedded.py``) keeps it in a directory; ``es dedup-index``
judges an index against one.  README gives the bytes per document.
"""

from __future__ import annotations

from collections.abc import Iterator

from ..index.bloom import ExactFilter
from ..index.nearindex import CandidateKeys
from ..model import Features, Match, Prepared, Sketch, Verdict
from ..similarity.rule import NearRule
from ..similarity.sketch import features_of
from .entries import STATUS_CODES, Entries, percent, reason_code
from .record import Record
from .rows import Rows


class MemoryStore:
    """The :class:`~scrapy_zhdedup.judge.Store` in this process, in memory only."""

    def __init__(self, keys: CandidateKeys, bloom: ExactFilter | None = None, *, rule: NearRule | None = None) -> None:
        self.keys = keys
        self.rule = rule or NearRule()
        self._rows = Rows(keys, self.rule, bloom if bloom is not None else ExactFilter())  # per stored document
        self._entries = Entries()  # per entry: every judged document, in order

    def __len__(self) -> int:
        """Stored (indexed) documents; exact repeats are remembered but not indexed."""
        return len(self._rows)

    @property
    def judged(self) -> int:
        return len(self._entries)

    @property
    def bloom(self) -> ExactFilter:
        return self._rows.bloom

    @property
    def bloom_false_positives(self) -> int:
        return self._rows.false_positives

    def find_exact(self, content_hash: str) -> Match | None:
        row = self._rows.find_exact(content_hash)
        return None if row is None else self._match(row, 0)

    def find_near(self, features: Features, exclude: str | None = None) -> Match | None:
        """The most similar earlier text the rule accepts (nearindex.py)."""
        rows = {self._entries.row(e) for e in self._entries.of(exclude)} if exclude is not None else ()
        hit = self._rows.near.nearest(features, rows)
        if hit is None:
            return None
        return Match(self._row_id(hit.row), self.cluster(hit.row), hit.distance, hit.similarity, hit.contained,
                     hit.reason, hit.row)

    def row_of(self, doc_id: str) -> int:
        """The row of ``doc_id``'s last indexed judgement, -1 if it has none."""
        return max((self._entries.row(e) for e in self._entries.of(doc_id)), default=-1)

    def _row_id(self, row: int) -> str:
        return self._entries.ids[self._rows.entry[row]]

    def cluster(self, row: int) -> str:
        """Cluster id of a row: the id of its cluster's first document."""
        return self._row_id(self._rows.roots[row])

    def _match(self, row: int, distance: int) -> Match:
        return Match(self._row_id(row), self.cluster(row), distance, row=row)

    def remember(self, prepared: Prepared, verdict: Verdict, match: Match | None) -> None:
        """Index a first copy or near repeat; an exact repeat is only remembered (its first copy answers for it)."""
        if verdict.status == "exact":
            assert match is not None
            self.add_repeat(prepared.doc_id, prepared.digest, match)
        else:
            self.add(prepared.doc_id, prepared.digest, prepared.featured(None), match)

    def add(self, doc_id: str, content_hash: str, features: Features, repeats: Match | None = None) -> None:
        """Remember a document: unique (an original, a candidate for later texts), or a near repeat of
        ``repeats``, whose cluster it joins (kept for its verdict and exact copies, never a candidate)."""
        row = len(self._rows)
        if repeats is None:
            record = Record(len(self._entries), row, STATUS_CODES["unique"], -1, 0, 0, 0, 0, row,
                               features.fingerprint, bytes.fromhex(content_hash), list(features.passages),
                               features.sketch.to_bytes(), doc_id)
        else:
            root = self._rows.roots[repeats.row] if repeats.row >= 0 else row  # -1: an earlier document not kept here
            record = Record(len(self._entries), row, STATUS_CODES["near"], repeats.row, repeats.distance,
                               percent(repeats.similarity), percent(repeats.contained), reason_code(repeats.reason), root,
                               features.fingerprint, bytes.fromhex(content_hash), list(features.passages),
                               features.sketch.to_bytes(), doc_id)
        self._record(record, features)

    def add_repeat(self, doc_id: str, content_hash: str, match: Match) -> None:
        """Remember an exact repeat of ``match`` (not indexed: the first copy answers for it)."""
        self._record(Record(len(self._entries), -1, STATUS_CODES["exact"], match.row, 0, 100, 100, reason_code("exact"),
                               0, 0, bytes.fromhex(content_hash), [], b"", doc_id))

    def previous(self, doc_id: str) -> Verdict | None:
        """The last verdict recorded for ``doc_id``, or None if it was never judged."""
        judgements = self._entries.of(doc_id)
        if not judgements:
            return None
        entry = judgements[-1]
        entries = self._entries
        row, match = entries.row(entry), entries.match(entry)
        distance, similarity, contained, reason = entries.measures(entry) if match >= 0 else (None, None, None, None)
        return Verdict(
            doc_id=doc_id,
            status=entries.status(entry),
            dup_of=None if match < 0 else self._row_id(match),
            distance=distance,
            cluster=self.cluster(row if row >= 0 else match),
            content_hash=entries.content_hash(entry),
            fingerprint=self._rows.near.bands.fingerprint(row) if row >= 0 else None,
            similarity=similarity,
            contained=contained,
            reason=reason,
        )

    def verdicts(self) -> Iterator[Verdict]:
        """Every judged id's last verdict, in the order the ids were first judged (``zhdedup report``)."""
        for doc_id in dict.fromkeys(self._entries.ids):
            verdict = self.previous(doc_id)
            assert verdict is not None
            yield verdict

    def _record(self, record: Record, features: Features | None = None) -> None:
        """The one way state changes: checked, kept (:meth:`_keep`), then applied in memory (``features``:
        the record's own, when the caller has them, so they are not decoded again)."""
        if len(record.content_hash) != 16:
            raise ValueError(f"content hashes are 128-bit hex strings, not {record.content_hash.hex()!r}")
        if "\x00" in record.doc_id:
            raise ValueError("document ids may not contain NUL characters")
        self._keep(record)
        self._apply(record, features)

    def _keep(self, record: Record) -> None:
        """Where a store that persists writes the record down, before anything changes (raising if it
        cannot); here only the id is checked to be UTF-8, as writing it would."""
        record.doc_id.encode("utf-8")

    def _apply(self, record: Record, features: Features | None = None) -> None:
        if record.row >= 0:
            if features is None:  # replaying the log
                features = features_of(record.fingerprint, record.passages, Sketch.from_bytes(record.sketch))
            self._rows.add(record, features, original=record.status == STATUS_CODES["unique"])
        self._entries.append(record)
