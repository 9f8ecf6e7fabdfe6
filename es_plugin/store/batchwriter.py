"""One sealed batch of the buffer written: in parts at once, failures dead-lettered, 409s resolved.

The buffer's writer task (buffer.py) hands each sealed batch to :meth:`BatchWriter.write` and enqueues
what it returns: a first copy to write again (the document that won the race was deleted since), or a
race loser's exact-repeat copy in annotate mode (writes.py).  A 409 on ``create`` means the text is
stored already, by another writer or by our own earlier attempt of the same request; the batch's
local index then answers with the stored copy, so later judgements of this process name it.
"""

from __future__ import annotations

import asyncio
import logging
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

from elastic_transport import TransportError
from elasticsearch import ApiError, AsyncElasticsearch

from ..errors import BulkInterruptedError, DeadLetterError, LookupItemError
from ..index.document import Stored
from ..operations import adrive
from .buffer import PendingBatch
from .deadletter import DeadLetters
from .lookups import EsLookups
from .stats import EsStats
from .writer import Action, BulkWriter
from .writes import VerdictWrites

logger = logging.getLogger(__name__)

BULK_PARTS = 2  # requests a sealed batch is written in, at once (elasticsearch-py's parallel_bulk sends 500s)
MIN_BULK_PART = 250  # actions: a smaller batch goes in one request


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

    async def write(self, batch: PendingBatch) -> list[Action]:
        """One sealed batch, in up to ``BULK_PARTS`` requests at once: a node indexes one bulk request of
        a one-shard index on one thread, and the last batch of a run, or the one a checkpoint waits
        for, would otherwise keep one core busy and the others idle.  Failures are dead-lettered, 409s
        resolved once every part is written; returns what to write next."""
        parts = bulk_parts(batch.actions)
        results = await asyncio.gather(*(adrive(self.client, self.writer.write(part)) for part in parts),
                                       return_exceptions=True)
        conflicts = []
        try:
            for part, result in zip(parts, results):
                if isinstance(result, BaseException):  # a bug here must not leave documents unwritten and unreported
                    logger.error("zhdedup: unexpected error writing a bulk batch", exc_info=result)
                    self._dead(part, "bulk", result if isinstance(result, Exception) else BulkInterruptedError(repr(result)))
                    continue
                self.dead_letters.write([self.dead_letters.record(a, None, a.body or {}, "bulk", error)
                                         for a, error in result.failed])
                conflicts += result.conflicts
            return await self._resolve(batch, conflicts)
        except DeadLetterError:
            raise  # nowhere to put them: the buffer stops and tells every waiter
        except Exception as exc:
            logger.exception("zhdedup: unexpected error resolving a bulk batch's conflicts")
            self._dead(conflicts, "conflict", exc)
            return []

    async def _resolve(self, batch: PendingBatch, conflicts: list[Action]) -> list[Action]:
        """A 409 on ``create``: the text is stored already, by another writer or by our own earlier attempt."""
        again = []
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
            if first.doc_id == ours.doc_id:  # our retried write landed the first time
                self.stats.inc("indexed")
                continue
            self.stats.inc("conflicts")
            batch.hashes[action.id] = first
            logger.info("zhdedup: %s was judged %s, but another writer stored the same text first as %s",
                        ours.doc_id, ours.status, first.doc_id)
            loser = self.writes.of_loser(action, first)
            if loser is not None:
                again.append(loser)
        return again

    def _dead(self, actions: list[Action], stage: str, error: Exception) -> None:
        self.dead_letters.write([self.dead_letters.record(a, None, a.body or {}, stage, error) for a in actions])
