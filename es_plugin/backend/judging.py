"""The judging of the backend's documents, owned in one place: which are looked up together, the order
they are decided in, and the answers each judgement sees.  It returns verdicts; it never calls back.

* The window (groupcommit.py): items that arrive together are looked up together, one realtime
  ``mget`` of their content hashes and their keys in the key registry, then one of the originals the
  keys name (lookups.py, registry.py).
* The order: every batch takes a turn when it is formed (:class:`Turns`), and decides only when every
  batch formed before it has decided or given up.  Its verdicts are returned once its documents are
  written and their keys claimed (buffer.py), so every writer sees them; a verdict writing changed
  (another writer stored the same text, or claimed an earlier-stamped original this one repeats:
  registry.py's order) is returned as changed.  Batches may be looked up at the same time (the
  pipeline's window starts one while another is in flight), but a batch whose answers overtook an
  earlier batch's waits for its decisions, then finds its documents in the buffer.  So the verdicts are
  those of judging one at a time in the order the items arrived.
* The answers (:class:`EsAnswers`): :func:`~scrapy_zhdedup.judge.judge` runs on Elasticsearch's answers
  plus the documents this process buffered that searches cannot see yet (buffer.py); what a verdict
  writes (writes.py) goes into the buffer before the next item is judged.  Judging and enqueueing is
  synchronous (``judge`` has no ``await``): the event loop runs it atomically, so two concurrent
  near-duplicates cannot both be judged unique.

An item whose lookups fail past the retries is written to the dead-letter file and gets
:class:`LookupFailedError` in its place.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any, NamedTuple, TypeVar, cast

from elastic_transport import SerializationError, TransportError
from elasticsearch import ApiError, AsyncElasticsearch

from scrapy_zhdedup.errors import InvalidDocumentError
from scrapy_zhdedup.judge import judge
from scrapy_zhdedup.model import Features, Match, Prepared, Verdict, verdict_for
from scrapy_zhdedup.similarity.fingerprinter import Fingerprinter
from scrapy_zhdedup.similarity.rule import closest
from scrapy_zhdedup.text.clean import decode_html

from ..errors import LookupFailedError, LookupItemError
from ..index.document import FIELD, query_features, repeat_id
from ..operations import adrive
from .buffer import BulkBuffer
from .deadletter import DeadLetters
from .groupcommit import Entry, LookupWindow
from .lookups import EsLookups
from .registry import FLUSHED_AGE
from .retry import reason
from .writer import Action
from .writes import VerdictWrites

T = TypeVar("T")
logger = logging.getLogger(__name__)


class Todo(NamedTuple):
    """A document of a batch that can be stored."""

    position: int  # in the batch
    prepared: Prepared
    document: dict[str, Any]  # its fields as stored


async def on_thread(executor: ThreadPoolExecutor, fn: Callable[[], T]) -> T:
    return await asyncio.get_running_loop().run_in_executor(executor, fn)


class Turns:
    """The order batches decide in: the order they took their turn.  A batch that decides nothing
    (its lookups failed, or it was cancelled) gives its turn up at once, and the turn passes over it
    when every batch before it is done: the next batch still waits for all earlier ones in flight."""

    def __init__(self) -> None:
        self._taken = 0
        self._serving = 0  # the first turn not done
        self._done: set[int] = set()  # turns done before their time
        self._waiting: dict[int, asyncio.Future[None]] = {}

    def take(self) -> int:
        self._taken += 1
        return self._taken - 1

    async def wait(self, turn: int) -> None:
        """Until every earlier turn is done.  Cancelling the waiter cancels nothing else."""
        if turn == self._serving:
            return
        waiter = self._waiting[turn] = asyncio.get_running_loop().create_future()
        try:
            await waiter
        finally:
            del self._waiting[turn]

    def done(self, turn: int) -> None:
        """``turn`` decided, or gave up (again: a no-op)."""
        if turn < self._serving:
            return
        self._done.add(turn)
        while self._serving in self._done:
            self._done.remove(self._serving)
            self._serving += 1
        waiter = self._waiting.get(self._serving)
        if waiter is not None and not waiter.done():
            waiter.set_result(None)


@dataclass
class EsAnswers:
    """The :class:`~scrapy_zhdedup.judge.Store` of one judgement: what Elasticsearch answered when the
    lookups ran, plus the pending batches as they are now (an equal or near text may have been
    buffered meanwhile); ``remember`` puts what the verdict writes into the buffer.  In annotate mode
    ``own`` is the document's own exact-repeat copy (stored under ``repeat_id``, which the lookup by
    content hash cannot see), so a rerun finds its verdict there too."""

    flushed_exact: Match | None
    flushed_near: Match | None
    buffer: BulkBuffer
    since: int  # first batch the Elasticsearch lookups could not see
    writes: VerdictWrites
    document: dict[str, Any]  # the item's fields, as stored
    words: str | None  # its text segmented for search, when that was done beforehand
    own: Match | None = None

    def find_exact(self, digest: str) -> Match | None:
        return self.flushed_exact or self.buffer.exact(digest)

    def find_near(self, features: Features, exclude: str | None = None) -> Match | None:
        """``exclude`` is never given here: :meth:`previous` knows no earlier verdicts."""
        flushed = [] if self.flushed_near is None else [
            (self.flushed_near.similarity, (FLUSHED_AGE,), self.flushed_near)]
        return closest([*flushed, *self.buffer.near(query_features(features), self.since)])

    def previous(self, doc_id: str) -> Verdict | None:
        """The stored verdict when Elasticsearch holds this very text under this id (a crawl or an input
        judged again); a changed text under a known id is not recognised here (``es ingest`` skips ids
        already stored)."""
        for found in (self.flushed_exact, self.own):
            if found is not None and found.doc_id == doc_id and found.verdict is not None:
                return found.verdict
        return None

    def remember(self, prepared: Prepared, verdict: Verdict, match: Match | None) -> None:
        write = self.writes.of_verdict(prepared, verdict, self.document, self.words)
        if write is not None:
            self.buffer.enqueue(write.action, write.pending)


@dataclass
class _Looked:
    """A batch's answers from Elasticsearch, by position in its todo list."""

    exact: list[Match | None]
    own: list[Match | None]
    near: dict[int, Match | None]  # by position in the batch


class JudgingCoordinator:
    """Judges the backend's documents in batches (see the module's docstring); made at the backend's
    start, once its client is."""

    def __init__(self, client: AsyncElasticsearch, lookups: EsLookups, buffer: BulkBuffer, writes: VerdictWrites,
                 dead_letters: DeadLetters, fingerprinter: Fingerprinter, executor: ThreadPoolExecutor, *,
                 window: float | None, limit: int, url: str) -> None:
        """``window``: groupcommit.py's (None: a batch starts only once the one before it returned);
        ``url`` the node's, as it may be printed."""
        self.client, self.lookups, self.buffer, self.writes = client, lookups, buffer, writes
        self.dead_letters, self.stats = dead_letters, lookups.stats
        self.fingerprinter, self.executor = fingerprinter, executor
        self.url = url
        self._window = LookupWindow(self.judge_many, window, limit)
        self._turns = Turns()

    async def judge(self, entry: Entry) -> Verdict:
        """The verdict of one document, judged with whatever arrived with it."""
        outcome = await self._window.submit(entry)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    async def judge_many(self, entries: Sequence[Entry]) -> list[Verdict | Exception]:
        """Judge prepared documents in order with one exact and one near lookup for all of them.

        The verdicts are those of judging them one at a time in this order, after every batch called
        before.  A document that cannot be judged gets its exception (InvalidDocumentError, or
        LookupFailedError after it was dead-lettered) in its place.
        """
        self.buffer.raise_if_failed()
        turn = self._turns.take()
        try:
            outcomes: list[Verdict | Exception | None] = [None] * len(entries)
            todo = self._storable(entries, outcomes)
            likely_new, words = await self._prepare(entries, todo)
            with self.buffer.judging() as since:
                try:
                    looked = await self._look_up(todo, likely_new)
                except (TransportError, ApiError, LookupItemError) as exc:
                    return self._lookup_failed(todo, outcomes, exc)
                await self._turns.wait(turn)
                for n, t in enumerate(todo):
                    answers = EsAnswers(looked.exact[n], looked.near.get(t.position), self.buffer, since, self.writes,
                                        t.document, words.get(t.position), looked.own[n])
                    # synchronous: nothing interleaves between decision and enqueue
                    outcomes[t.position] = judge(t.prepared, answers, self.fingerprinter.features)
                self._turns.done(turn)  # the next batch may decide while this one waits for the writer
                last = self.buffer.open.seq if self.buffer.open.actions else self.buffer.open.seq - 1
                if last >= since:  # other writers see them before the verdicts are returned, and a verdict
                    await self.buffer.written(last)  # naming a buffered document knows what writing made of it
                again = self._changed(todo, outcomes, range(since, last + 1))
                if again:
                    await self._judge_again(again, outcomes, words)
            return cast("list[Verdict | Exception]", outcomes)
        finally:
            self._turns.done(turn)  # lookups failed, or cancelled: nothing decided here

    def _storable(self, entries: Sequence[Entry], outcomes: list[Verdict | Exception | None]) -> list[Todo]:
        """The documents as they will be stored (page bytes as text); InvalidDocumentError in the
        outcome of one that cannot be."""
        todo = []
        serializer = self.client.transport.serializers.get_serializer("application/json")
        for i, entry in enumerate(entries):
            prepared, document = entry.prepared, entry.document
            if FIELD in document:
                outcomes[i] = InvalidDocumentError(
                    f"item {prepared.doc_id!r} has a field named {FIELD!r}, which scrapy-zhdedup owns in the index")
                continue
            document = {key: decode_html(value) if isinstance(value, bytes) else value for key, value in document.items()}
            try:
                serializer.dumps(document)
            except SerializationError as exc:
                error = InvalidDocumentError(f"item {prepared.doc_id!r} cannot be stored in Elasticsearch: {exc}")
                error.__cause__ = exc
                outcomes[i] = error
                continue
            todo.append(Todo(i, prepared, document))
        return todo

    async def _prepare(self, entries: Sequence[Entry], todo: list[Todo]) -> tuple[list[Todo], dict[int, str | None]]:
        """The documents likely new, with their features; and the words for search of those likely stored."""
        # a text this process stored or found stored probably needs no fingerprint: its exact lookup is likely to answer
        likely_new = [t for t in todo if t.prepared.digest not in self.writes.seen]
        await self._features([t.prepared for t in likely_new])
        words: dict[int, str | None] = {i: e.words for i, e in enumerate(entries) if e.words is not None}
        # segmented for search only when it will likely be stored: exact repeats in drop mode are not
        search = self.writes.search
        unsegmented = [t for t in (todo if self.writes.index_duplicates else likely_new)
                       if t.position not in words] if search.segments else []
        if unsegmented:  # not otherwise: the worker thread may be waiting for a worker process's next item
            words |= dict(zip((t.position for t in unsegmented), await on_thread(
                self.executor, lambda: [search.words(t.prepared.clean) for t in unsegmented])))
        return likely_new, words

    async def _look_up(self, todo: list[Todo], likely_new: list[Todo]) -> _Looked:
        """Both lookups at once; then the near one for the texts the exact one did not answer after all."""
        digests = [t.prepared.digest for t in todo]
        if self.writes.index_duplicates:  # an exact repeat's own copy: its verdict, for a rerun (EsAnswers.own)
            digests += [repeat_id(t.prepared.digest, t.prepared.doc_id) for t in todo]
        found, near = await adrive(self.client, self.lookups.both(
            digests, [query_features(t.prepared.featured(None)) for t in likely_new]))
        exact, own = found[: len(todo)], found[len(todo):] or [None] * len(todo)
        near_of = {t.position: n for t, n in zip(likely_new, near)}
        unanswered = [t for t, e in zip(todo, exact) if e is None and t.position not in near_of]
        if unanswered:
            await self._features([t.prepared for t in unanswered])
            more = await adrive(self.client, self.lookups.near(
                [query_features(t.prepared.featured(None)) for t in unanswered]))
            near_of.update((t.position, n) for t, n in zip(unanswered, more))
        return _Looked(exact, own, near_of)

    def _changed(self, todo: list[Todo], outcomes: list[Verdict | Exception | None], seqs: range) -> list[Todo]:
        """The verdicts writing changed (batchwriter.py): another writer stored the same text first, or
        claimed an earlier original this one repeats.  A verdict naming a buffered document X that writing
        turned into a repeat of W must not name X (in drop mode a page never delivered; one writer judging
        in the claims' order never judges against a repeat): it names W, and a near one is returned to be
        judged again (:meth:`_judge_again`), as is, in annotate mode, an exact one, whose stored copy says
        so.  An exact repeat names X only when X lost a race to W's same text: of X made a near repeat it
        stays (an exact repeat of a near repeat names it on one writer too)."""
        changed = {}
        for seq in seqs:
            batch = self.buffer.batch(seq)
            if batch is not None:
                changed.update(batch.changed)
        if not changed:
            return []
        demoted = {now.doc_id: now for now in changed.values()}
        again = []
        for t in todo:
            verdict = outcomes[t.position]
            if not isinstance(verdict, Verdict):
                continue
            now = changed.get(t.prepared.digest)
            if now is not None and now.doc_id == verdict.doc_id:
                outcomes[t.position] = now
                continue
            first = demoted.get(verdict.dup_of) if verdict.dup_of is not None else None
            if first is None or first.dup_of is None or (verdict.status == "exact" and first.status != "exact"):
                continue
            outcomes[t.position] = replace(verdict, dup_of=first.dup_of, cluster=first.cluster)
            if verdict.status == "near" or self.writes.index_duplicates:
                again.append(t)
        return again

    async def _judge_again(self, again: list[Todo], outcomes: list[Verdict | Exception | None],
                           words: dict[int, str | None]) -> None:
        """The repeats :meth:`_changed` returned: a near one judged again against the originals claimed now
        (one registry lookup), as one writer judging in the claims' order would (X is no candidate there);
        one no original accepts is an original, written and claimed like any (its claim may still find an
        earlier-stamped one it repeats).  In annotate mode their stored copies are written again to say so.
        If the lookup fails they stay named by W (logged: ``es reconcile`` judges them again)."""
        near = [t for t in again if cast(Verdict, outcomes[t.position]).status == "near"]
        fresh: dict[int, Match | None] = {}
        if near:
            try:
                found = await adrive(self.client, self.lookups.near(
                    [query_features(t.prepared.featured(None)) for t in near]))
                fresh = dict(zip((t.position for t in near), found))
            except (TransportError, ApiError, LookupItemError) as exc:
                self.stats.inc("errors")
                logger.warning("zhdedup: %d repeat(s) of a document that became a repeat could not be judged "
                               "again (%s); `zhdedup es reconcile` does", len(near), reason(exc))
        for t in again:
            verdict = cast(Verdict, outcomes[t.position])
            if t.position in fresh:
                verdict = verdict_for(verdict.doc_id, verdict.content_hash, verdict.fingerprint, fresh[t.position])
                outcomes[t.position] = verdict
            if verdict.status != "unique":
                fix = self.writes.of_renamed(t.prepared.digest, verdict)
                if fix is not None:
                    self.buffer.enqueue(fix)
                continue
            if self.writes.index_duplicates:  # its copy, stored as a repeat, gives way to an original's
                self.buffer.enqueue(Action("delete", t.prepared.digest))
            write = self.writes.of_verdict(t.prepared, verdict, t.document, words.get(t.position))
            assert write is not None  # an original is always written
            self.buffer.enqueue(write.action, write.pending)
        if self.buffer.open.actions:
            last = self.buffer.open.seq
            await self.buffer.written(last)
            self._changed(again, outcomes, range(last, last + 1))  # its claim may make it a repeat after all

    def _lookup_failed(self, todo: list[Todo], outcomes: list[Verdict | Exception | None],
                       exc: Exception) -> list[Verdict | Exception]:
        self.stats.inc("errors")
        text_field = self.writes.search.text_field
        self.dead_letters.write([  # with the text as written: what a replay judges (the page is not kept)
            self.dead_letters.record(None, t.prepared.doc_id, {**t.document, text_field: t.prepared.written}, "lookup", exc)
            for t in todo])
        for t in todo:
            error = LookupFailedError(
                f"Elasticsearch at {self.url} did not answer the lookups of {t.prepared.doc_id!r} ({reason(exc)}); "
                f"the item was kept in {self.dead_letters.path}, not judged")
            error.__cause__ = exc
            outcomes[t.position] = error
        return cast("list[Verdict | Exception]", outcomes)

    async def _features(self, batch: list[Prepared]) -> None:
        """Compute fingerprints and passage keys on the worker thread (a worker pool may have already)."""
        missing = [p for p in batch if p.features is None]
        if missing:
            await on_thread(self.executor, lambda: [p.featured(self.fingerprinter.features) for p in missing])
