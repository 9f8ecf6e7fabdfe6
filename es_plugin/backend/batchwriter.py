"""One sealed batch of the buffer written: in parts at once, failures dead-lettered, 409s resolved,
then the originals' keys claimed in the key registry (registry.py).

The buffer's writer task (buffer.py) hands each sealed batch to :meth:`BatchWriter.write` and enqueues
what it returns: a first copy to write again (the document that won the race was deleted since), or a
race loser's exact-repeat copy in annotate mode (writes.py).  A 409 on ``create`` means the text is
stored already, by another writer or by our own earlier attempt of the same request; the batch's
local index then answers with the stored copy, so later judgements of this process name it, and the
document's verdict becomes an exact repeat of it (``PendingBatch.changed``: the verdicts are returned
only once their batch is written).  An original whose claim finds it repeats an earlier-stamped one
becomes a near repeat the same way, its stored copy marked (annotate) or deleted (drop) before the
batch counts as written; so does another writer's original that a claim finds repeats one of ours
claimed with an earlier stamp (their claims crossed).
"""

from __future__ import annotations

import asyncio
import logging
import time
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

from elastic_transport import TransportError
from elasticsearch import ApiError, AsyncElasticsearch

from scrapy_zhdedup.model import verdict_for

from ..errors import BulkInterruptedError, DeadLetterError, LookupItemError
from ..index.document import Stored
from ..operations import adrive
from .buffer import PendingBatch
from .deadletter import DeadLetters
from .lookups import EsLookups
from .progress import CLAIMS
from .registry import Claimant, claimant_of
from .stats import EsStats
from .writer import Action, BulkWriter
from .writes import VerdictWrites

logger = logging.getLogger(__name__)

BULK_PARTS = 2  # requests a sealed batch is written in, at once (elasticsearch-py's parallel_bulk sends 500s)
MIN_BULK_PART = 250  # actions: a smaller batch goes in one request
REFRESH_ID = "zhdedup-refresh"  # deleted (never there: ids are content hashes) by the bulk that refreshes


def bulk_parts(actions: Sequence[Action]) -> list[list[Action]]:
    """``actions`` in up to ``BULK_PARTS`` parts of at least ``MIN_BULK_PART``, split by ``_id`` so that
    actions on one document stay in one request, in their order."""
    n = max(1, min(BULK_PARTS, len(actions) // MIN_BULK_PART))
    if n == 1:
        return [list(actions)]
    parts: list[list[Action]] = [[] for _ in range(n)]
    for action in actions:
        parts[zlib.crc32(action.id.encode("utf-8")) % n].append(action)
    return [part for part in parts if part]


@dataclass
class BatchWriter:
    client: AsyncElasticsearch
    writer: BulkWriter
    lookups: EsLookups  # the exact lookup that resolves a 409
    writes: VerdictWrites  # what a race loser writes instead
    dead_letters: DeadLetters
    stats: EsStats
    refreshed: float = 0.0  # time.monotonic() of the last write made visible to searches, 0: all are

    async def refresh(self) -> None:
        """Make what was written visible to searches: a bulk with ``refresh`` (which the ``write``
        privilege allows, unlike the refresh API), holding only the delete of a document never there."""
        if not self.refreshed:
            return
        operations = Action("delete", REFRESH_ID).operations(self.writer.index)
        try:
            await adrive(self.client, self.writer.policy.call(
                lambda c: c.bulk(operations=operations, refresh=True), self.stats))
            self.refreshed = 0.0
        except (TransportError, ApiError) as exc:  # the documents are stored: only searches wait for them
            logger.warning("zhdedup: could not make the documents written to %s searchable yet (%s); the index's "
                           "next refresh will", self.writer.index, exc)

    async def write(self, batch: PendingBatch) -> list[Action]:
        """One sealed batch, in up to ``BULK_PARTS`` requests at once: a node indexes one bulk request of
        a one-shard index on one thread, and the last batch of a run, or the one a checkpoint waits
        for, would otherwise keep one core busy and the others idle.  Failures are dead-lettered, 409s
        resolved once every part is written; returns what to write next."""
        parts = bulk_parts(batch.actions)
        results = await asyncio.gather(*(adrive(self.client, self.writer.write(part, refresh=False)) for part in parts),
                                       return_exceptions=True)
        self.refreshed = self.refreshed or time.monotonic()
        conflicts: list[Action] = []
        unwritten: set[int] = set()
        try:
            for part, result in zip(parts, results):
                if isinstance(result, BaseException):  # a bug here must not leave documents unwritten and unreported
                    logger.error("zhdedup: unexpected error writing a bulk batch", exc_info=result)
                    self._dead(part, "bulk", result if isinstance(result, Exception) else BulkInterruptedError(repr(result)))
                    unwritten.update(map(id, part))
                    continue
                self.dead_letters.write([self.dead_letters.record(a, None, a.body or {}, "bulk", error)
                                         for a, error in result.failed])
                unwritten.update(id(a) for a, _ in result.failed)
                unwritten.update(map(id, result.conflicts))
                conflicts += result.conflicts
            again, landed = await self._resolve(batch, conflicts)
            await self._claim(batch, [a for a in batch.actions if a.op == "create" and id(a) not in unwritten] + landed)
            return again
        except DeadLetterError:
            raise  # nowhere to put them: the buffer stops and tells every waiter
        except Exception as exc:
            logger.exception("zhdedup: unexpected error resolving a bulk batch's conflicts")
            self._dead(conflicts, "conflict", exc)
            return []

    async def _resolve(self, batch: PendingBatch, conflicts: list[Action]) -> tuple[list[Action], list[Action]]:
        """A 409 on ``create``: the text is stored already, by another writer or by our own earlier attempt
        (a retried request, or a dead writer's journal taken over).  Returns what to write again, and the
        creates that had landed and are still originals: their keys are claimed like the batch's, since the
        attempt that wrote them may have died before claiming."""
        again, landed = [], []
        for action in conflicts:
            ours = Stored.from_source(action.body or {})
            assert ours is not None  # every create of ours carries its object
            try:
                [first] = await adrive(self.client, self.lookups.exact([action.id]))
            except (TransportError, ApiError, LookupItemError) as exc:
                self.stats.inc("errors")
                self._dead([action], "conflict", exc)
                continue
            if first is None:  # deleted since the 409: write ours again
                again.append(action)
                continue
            if first.doc_id == ours.doc_id:  # our earlier attempt landed
                self.stats.inc("indexed")
                if first.verdict is not None and first.verdict.status == "unique":
                    landed.append(action)
                continue
            self.stats.inc("conflicts")
            batch.hashes[action.id] = first
            batch.changed[action.id] = verdict_for(ours.doc_id, action.id, None, first, exact=True)
            logger.info("zhdedup: %s was judged %s, but another writer stored the same text first as %s",
                        ours.doc_id, ours.status, first.doc_id)
            loser = self.writes.of_loser(action, first)
            if loser is not None:
                again.append(loser)
        return again, landed

    async def _claim(self, batch: PendingBatch, written: list[Action]) -> None:
        """The written originals' keys claimed; one found to repeat an earlier-stamped original becomes its
        near repeat (``batch.changed``) and its stored copy says so before the batch counts as written, and
        so does the stored copy of another writer's original found to repeat one of ours claimed with an
        earlier stamp (their claims crossed in flight; its verdict may have been returned already, as
        ``es reconcile`` would find it).  A registry that cannot be written leaves the keys unclaimed
        (logged): the documents are stored, and ``es reconcile`` claims them.  Then this writer's progress
        says the claims are finished (progress.py): other writers' lookups wait for it."""
        CLAIMS.begin()  # before the claimants take their stamps
        claimants = {c.hash: (c, a) for a in written if (c := claimant_of(a.id, a.body or {})) is not None}
        try:
            await self._claim_and_fix(batch, claimants)
        finally:
            done = CLAIMS.end([c.stamp for c, _ in claimants.values()])
        if done is not None:
            await adrive(self.client, self.lookups.registry.publish(done))

    async def _claim_and_fix(self, batch: PendingBatch, claimants: dict[str, tuple[Claimant, Action]]) -> None:
        if not claimants:
            return
        try:
            claimed = await adrive(self.client, self.lookups.registry.claim([c for c, _ in claimants.values()]))
        except (TransportError, ApiError, LookupItemError) as exc:
            self.stats.inc("errors")
            logger.warning("zhdedup: claiming the keys of %d original(s) in %s failed (%s); `zhdedup es reconcile` "
                           "claims them", len(claimants), self.lookups.registry.name, exc)
            return
        fixes = []
        for digest, first in claimed.repeats.items():
            ours = Stored.from_source(claimants[digest][1].body or {})
            assert ours is not None  # an original's create carries its object
            verdict, fix = self.writes.of_repeat(digest, ours, first)
            batch.changed[digest] = verdict
            fixes.append(fix)
            logger.info("zhdedup: %s repeats %s, which another writer claimed first", verdict.doc_id, first.doc_id)
        for digest, (theirs, first) in claimed.marked.items():
            verdict, fix = self.writes.of_repeat(digest, theirs, first)
            fixes.append(fix)
            logger.info("zhdedup: %s, stored by another writer, repeats %s, which was judged before it",
                        verdict.doc_id, first.doc_id)
        if fixes:
            result = await adrive(self.client, self.writer.write(fixes, refresh=False))
            self.dead_letters.write([self.dead_letters.record(a, None, a.body or {}, "bulk", error)
                                     for a, error in result.failed])

    def _dead(self, actions: list[Action], stage: str, error: Exception) -> None:
        self.dead_letters.write([self.dead_letters.record(a, None, a.body or {}, stage, error) for a in actions])
