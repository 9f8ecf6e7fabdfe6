"""The backend's documents from their verdict until every writer can see them.

Visibility.  Each lookup batch is written before its verdicts are returned (judging.py waits for
:meth:`BulkBuffer.written`): the documents in one bulk, then the originals' keys claimed in the key
registry (batchwriter.py, registry.py).  A realtime ``GET`` sees both at once, in every writer, with no
refresh; searches (``es search``, ``report``) see them after the index's next refresh (the index
refreshes when searched, and :meth:`BulkBuffer.flush` makes everything written visible).  Each
judgement notes how many batches were visible when its lookups started (:meth:`BulkBuffer.judging`)
and, when deciding, also consults every local batch after those, so a batch judged while an earlier
one of this process is being written still sees it.  Batches are written one at a time, in order, by
one task; a full batch, a lookup batch's end, or the flush interval seals the open one.

The writer task is given a :class:`BatchSink` (batchwriter.py) at :meth:`BulkBuffer.start`: it writes a
batch and returns what must be written next (a 409's resolution), which the buffer enqueues itself.
The writer task never dies silently: if the sink raises (the dead-letter file cannot be written:
the documents can go nowhere), the task stops and every later ``flush``, ``written`` and
``raise_if_failed`` raises that error, instead of waiting forever for a writer that is gone.
"""

from __future__ import annotations

import asyncio
from collections import Counter, deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

from scrapy_zhdedup.errors import StoreFailedError, ZhDedupError
from scrapy_zhdedup.index.nearindex import CandidateKeys, NearIndex
from scrapy_zhdedup.model import Features, Match, Verdict
from scrapy_zhdedup.similarity.rule import NearRule

from .journal import Journal
from .writer import Action

# A batch is also sealed at about this many bytes: a bulk request stays near Elastic's advice
# (5-15 MB) whatever the pages' size, far below the node's 100 MB limit (http.max_content_length).
MAX_BULK_BYTES = 16 << 20
PENDING_AGE = 1  # age rank of a buffered document: younger than anything Elasticsearch holds (rank 0)


class Pending(NamedTuple):
    """What a written document adds to its batch's local index."""

    digest: str  # its content hash
    own: Match  # what a later text that repeats it is told
    features: Features
    original: bool  # unique, so a candidate for later texts


@dataclass
class PendingBatch:
    """Documents for one bulk request, indexed locally until searches can see them."""

    seq: int
    keys: CandidateKeys
    rule: NearRule
    actions: list[Action] = field(default_factory=list)
    hashes: dict[str, Match] = field(default_factory=dict)
    rows: list[Match] = field(default_factory=list)
    nbytes: int = 0  # about the size of the bulk body (size_of)
    done: bool = False
    changed: dict[str, Verdict] = field(default_factory=dict)  # by content hash: verdicts writing changed

    def __post_init__(self) -> None:
        self.near = NearIndex(self.keys, self.rule)

    def add(self, pending: Pending) -> None:
        """Index a document written in this batch."""
        self.hashes[pending.digest] = pending.own
        self.near.add(pending.features, pending.original)
        self.rows.append(pending.own)


class BatchSink(Protocol):
    async def write(self, batch: PendingBatch) -> list[Action]:
        """Send one sealed batch and dead-letter what fails; returns the actions to write next.  If it
        raises, writing stops."""
        ...

    async def refresh(self) -> None:
        """Make what was written visible to searches."""
        ...


class BulkBuffer:
    def __init__(self, keys: CandidateKeys, rule: NearRule, *, bulk_size: int,
                 flush_interval: float, journal: Journal | None = None) -> None:
        """``journal`` keeps every action on disk until its batch is written and claimed (journal.py)."""
        self.keys, self.rule = keys, rule
        self.journal = journal
        self.bulk_size, self.flush_interval = bulk_size, flush_interval
        self._sink: BatchSink | None = None
        self.batches: deque[PendingBatch] = deque([self._batch(0)])  # oldest kept .. open
        self._sealed: deque[PendingBatch] = deque()
        self._visible_upto = 0  # batches with seq below this are visible to every new lookup
        self._active: Counter[int] = Counter()  # judgements in flight, by the _visible_upto they started at
        self._wake = asyncio.Event()
        self._written = asyncio.Condition()
        self._tasks: list[asyncio.Task[None]] = []
        self._failure: Exception | None = None  # why the writer task stopped

    @property
    def open(self) -> PendingBatch:
        return self.batches[-1]

    def _batch(self, seq: int) -> PendingBatch:
        return PendingBatch(seq, self.keys, self.rule)

    # -- what judgements see -------------------------------------------------------------------------

    @contextmanager
    def judging(self) -> Iterator[int]:
        """One judgement in flight; yields the first batch its lookups may not see."""
        since = self._visible_upto
        self._active[since] += 1
        try:
            yield since
        finally:
            self._active[since] -= 1
            if not self._active[since]:
                del self._active[since]
            self._forget_written()

    def exact(self, digest: str) -> Match | None:
        for batch in self.batches:
            match = batch.hashes.get(digest)
            if match is not None:
                return match
        return None

    def near(self, features: Features, since: int) -> list[tuple[float, Any, Match]]:
        """Accepted candidates among the batches a lookup that started at ``since`` could not see."""
        found = []
        for batch in self.batches:
            if batch.seq < since:
                continue
            hit = batch.near.nearest(features)
            if hit is not None:
                row = batch.rows[hit.row]
                found.append((hit.similarity, (PENDING_AGE, batch.seq, hit.row),
                              Match(row.doc_id, row.cluster, hit.distance, hit.similarity, hit.contained, hit.reason)))
        return found

    def _forget_written(self) -> None:
        floor = min(self._active, default=self._visible_upto)
        while self.batches[0].done and self.batches[0].seq < floor:
            self.batches.popleft()

    # -- filling and writing ---------------------------------------------------------------------------

    def enqueue(self, action: Action, pending: Pending | None = None) -> None:
        """Add ``action`` to the open batch, and ``pending`` to that batch's local index.  An action that would take a batch with
        others past ``MAX_BULK_BYTES``
        starts the next one: a document too large for the node (413) is then refused alone, not with
        every document of its bulk."""
        size = size_of(action.body)
        if self.open.actions and self.open.nbytes + size > MAX_BULK_BYTES:
            self.seal()
        batch = self.open
        if self.journal is not None:
            self.journal.record(batch.seq, action)
        if pending is not None:
            batch.add(pending)
        batch.actions.append(action)
        batch.nbytes += size
        if len(batch.actions) >= self.bulk_size or batch.nbytes >= MAX_BULK_BYTES:
            self.seal()

    def seal(self) -> None:
        """Hand the open batch to the writer task and open a new one."""
        batch = self.open
        if not batch.actions:
            return
        self._sealed.append(batch)
        self.batches.append(self._batch(batch.seq + 1))
        self._wake.set()

    async def written(self, seq: int) -> None:
        """Wait until batch ``seq`` and every one before it is written (sealing it if it is open)."""
        if self.open.seq <= seq:
            self.seal()
        async with self._written:
            await self._written.wait_for(lambda: self._visible_upto > seq or self._failure is not None)
        self.raise_if_failed()

    def batch(self, seq: int) -> PendingBatch | None:
        """Batch ``seq``, while a judgement in flight may need it."""
        return next((batch for batch in self.batches if batch.seq == seq), None)

    async def flush(self) -> None:
        """Write everything buffered and wait until it is visible to searches."""
        # A batch sealed by size may still be on its way; writing can enqueue more (annotated losers of a 409 race).
        while self.open.actions or self._sealed:
            self.raise_if_failed()
            self.seal()
            async with self._written:
                await self._written.wait_for(lambda: not self._sealed or self._failure is not None)
        self.raise_if_failed()
        if self._sink is not None:
            await self._sink.refresh()

    def raise_if_failed(self) -> None:
        """Raise the writer's error, with how many judged documents it leaves unwritten."""
        if self._failure is not None:
            unwritten = sum(len(batch.actions) for batch in self._sealed) + len(self.open.actions)
            kind = type(self._failure) if isinstance(self._failure, ZhDedupError) else StoreFailedError
            raise kind(f"{self._failure}; {unwritten} more judged document(s) not stored") from self._failure

    def start(self, sink: BatchSink) -> None:
        """Start writing sealed batches to ``sink``, and sealing the open one every ``flush_interval``."""
        self._sink = sink
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._writer()), loop.create_task(self._timer())]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _timer(self) -> None:
        while True:
            await asyncio.sleep(self.flush_interval)
            self.seal()

    async def _writer(self) -> None:
        """Writes sealed batches in order.  Whatever ends it (the sink raising, or a bug anywhere here)
        becomes ``_failure`` for every waiter: a task that died silently would leave them waiting forever."""
        assert self._sink is not None
        try:
            while True:
                await self._wake.wait()
                self._wake.clear()
                while self._sealed:
                    batch = self._sealed[0]
                    for action in await self._sink.write(batch):
                        self.enqueue(action)
                    batch.done = True
                    self._visible_upto = batch.seq + 1
                    self._sealed.popleft()
                    self._forget_written()
                    if self.journal is not None:
                        self.journal.done(batch.seq)
                    async with self._written:
                        self._written.notify_all()
        except Exception as exc:
            self._failure = exc
            async with self._written:
                self._written.notify_all()


def size_of(value: Any) -> int:
    """About the bytes ``value`` takes as JSON, at most: 3 a character (CJK in UTF-8), 8 for anything else."""
    if isinstance(value, str):
        return 3 * len(value)
    if isinstance(value, dict):
        return sum(size_of(k) + size_of(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return sum(map(size_of, value))
    return 8
