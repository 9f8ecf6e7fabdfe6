"""What a verdict writes to the index: the bulk action for a judged document, and what it adds to the
buffer's local index (buffer.py) so that later judgements of this process find it before searches can.

First copies are written with ``op_type=create`` under their content hash (a second writer of the
same text gets a 409: batchwriter.py); exact repeats, in annotate mode only, under ``repeat_id``; a
near repeat, in annotate mode only, is created under its hash like a first copy, so a later exact
repeat of it is found by the same lookup.  A duplicate in drop mode writes nothing.

The filter of hashes seen here lives beside it: what a verdict stored, or found stored, is likely to
be answered by the exact lookup next time, so the judging step (judging.py) can skip the fingerprint.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, NamedTuple

from scrapy_zhdedup.index.bands import BandLayout
from scrapy_zhdedup.index.bloom import ExactFilter
from scrapy_zhdedup.model import Features, Match, Prepared, Verdict, verdict_for

from ..index.chinese import SearchText
from ..index.document import Stored, item_fields, query_features, repeat_id, verdict_update
from .buffer import Pending
from .writer import Action


class Write(NamedTuple):
    action: Action
    pending: Pending | None  # what it adds to its batch's local index


@dataclass
class VerdictWrites:
    layout: BandLayout
    search: SearchText
    index_duplicates: bool  # annotate mode: duplicates are stored too, marked
    seen: ExactFilter  # hashes stored or found stored by this process

    def of_verdict(self, prepared: Prepared, verdict: Verdict, document: dict[str, Any],
                   words: str | None) -> Write | None:
        """What ``verdict`` writes (None: nothing, a duplicate in drop mode).  ``words`` is None when the
        text looked seen before (not segmented beforehand): it is segmented here only if it is written."""
        digest = prepared.digest
        written = verdict.status == "unique" or self.index_duplicates
        if written or verdict.status == "exact":  # what the exact lookup finds; a dropped near repeat seen
            self.seen.add(digest)  # again is therefore searched near beside that lookup, not after it
        if not written:
            return None
        document = {**document, self.search.text_field: prepared.written}
        if words is None:
            words = self.search.words(prepared.clean)
        if verdict.status == "exact":
            return Write(Action("index", repeat_id(digest, verdict.doc_id), self.source(verdict, document, words=words)),
                         None)
        features = query_features(prepared.featured(None))
        return Write(Action("create", digest, self.source(verdict, document, features, words)),
                     Pending(digest, Match(verdict.doc_id, verdict.cluster, 0), features, verdict.status == "unique"))

    def of_loser(self, action: Action, first: Match) -> Action | None:
        """What a first copy that lost a 409 race to ``first`` writes instead: its exact-repeat copy in
        annotate mode, nothing in drop mode."""
        ours = Stored.from_source(action.body or {})
        if not self.index_duplicates or ours is None:
            return None
        verdict = verdict_for(ours.doc_id, action.id, None, first, exact=True)
        return Action("index", repeat_id(action.id, ours.doc_id),
                      self.source(verdict, item_fields(action.body or {}), words=ours.words))

    def of_repeat(self, digest: str, ours: Stored, first: Match) -> tuple[Verdict, Action]:
        """A stored original that a claim found repeats ``first`` (registry.py): its verdict, and the write
        that makes its stored copy (``_id`` ``digest``) say so (marked in annotate mode, deleted in drop mode)."""
        assert ours.fp is not None  # an original's object carries its fingerprint
        verdict = verdict_for(ours.doc_id, digest, ours.fp, first)
        if self.index_duplicates:
            return verdict, Action("update", digest, verdict_update(verdict))
        return verdict, Action("delete", digest)

    def of_renamed(self, digest: str, verdict: Verdict) -> Action | None:
        """The update that makes a stored repeat's copy name ``verdict``'s original instead of the one it
        was judged against, which writing made a repeat (judging.py); None in drop mode (nothing stored)."""
        if not self.index_duplicates:
            return None
        return Action("update", repeat_id(digest, verdict.doc_id) if verdict.status == "exact" else digest,
                      verdict_update(verdict))

    def source(self, verdict: Verdict, document: dict[str, Any], features: Features | None = None,
               words: str | None = None) -> dict[str, Any]:
        """The document as stored: the item's own fields and its ``zhdedup`` object (document.py)."""
        return {**document, **Stored.of(verdict, datetime.now(timezone.utc), features=features,
                                        words=words).to_source(self.layout)}
