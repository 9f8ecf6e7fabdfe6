"""Elasticsearch as the shared store: ``ZHDEDUP_BACKEND = "elasticsearch"``.

Several crawler processes can judge against one index.  Per item:

1. clean and hash (worker thread); a local Bloom filter of hashes seen here says whether the
   fingerprint is likely needed at all (if not, the exact lookup goes first; else both at once);
2. exact: the not-yet-visible documents this process buffered, then a realtime ``GET`` of
   ``_id = content hash`` (sees every flushed document of every writer, refreshed or not);
3. near: one search, ``bool/should`` over the band keyword fields (within the threshold) and over
   the passage keys (enough shared passages, within the looser passage threshold; see passages.py),
   Hamming-verified, plus the in-process index of documents that searches cannot see yet;
4. the verdict, and the document goes into the bulk buffer (duplicates only in annotate mode).

First copies are written with ``op_type=create`` under their hash, so two writers storing the same
text race on one ``_id`` and the loser gets a 409: that is how exact repeats are caught across
processes even inside the window where neither has flushed.

Visibility.  A bulk is sent with ``refresh=true``, so once it returns its documents are visible to
searches that start afterwards (``wait_for`` would cap a writer at one bulk per refresh interval).
Each judgement notes how many batches were visible when its lookups started and, when deciding,
also consults every local batch after those.  Batches leave memory only when no judgement in
flight could still need them, so nothing falls between "in the local buffer" and "visible to search".

Deciding and enqueueing is one synchronous method (:meth:`_decide_and_enqueue`, no ``await``): the
event loop runs it atomically, so two concurrent near-duplicates cannot both be judged unique —
the guarantee of a lock, enforced by the function's type instead of by discipline.

Failures: transient errors (connection, timeout, 429, 5xx; for bulk items also the 403 of a
write-blocked index) are retried with capped, jittered exponential backoff.  Documents ES rejects
for good go to a dead-letter JSONL file with the reason; an item whose lookup cannot be done is
written there too and its ``judge`` raises :class:`EsUnavailableError`, so nothing is lost quietly.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import random
import sys
from collections import Counter, deque
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TypeVar

from elastic_transport import ConnectionError as EsConnectionError
from elastic_transport import ConnectionTimeout, SerializationError, TransportError
import numpy as np
from elasticsearch import ApiError, AsyncElasticsearch, NotFoundError

from es_plugin.client import EsUnavailableError, acheck_reachable, make_async_client
from es_plugin.template import ainstall, zhdedup_fields

from .bandindex import BandIndex
from .bands import BandLayout
from .bloom import ExactFilter
from .config import DedupConfig, EsConfig
from .engine import Fingerprinter, Verdict, verdict_for
from .errors import ZhDedupError
from .fingerprint import hamming
from .keytable import KeyTable
from .passages import distance_limit, votes_needed
from .store import Match, nearest_with_passages
from .text import content_hash, decode_html

logger = logging.getLogger(__name__)
T = TypeVar("T")

DEFAULT_DEAD_LETTER = "zhdedup-dead-letter.jsonl"
ASYNCIO_REACTOR = "twisted.internet.asyncioreactor.AsyncioSelectorReactor"
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
SEARCH_PAGE = 100  # candidates per search page, most shared keys first
MAX_QUERY_PASSAGES = 512  # passage keys used per document: bounded bool clauses (max_clause_count)
MAX_RESULT_WINDOW = 10_000  # Elasticsearch's default cap on from + size
SETUP_TIMEOUT = 60.0  # seconds for template install and index creation at start
MAX_SEALED = 2  # full batches waiting for the writer before judgements wait (backpressure)
_SOURCE = ["zhdedup.doc_id", "zhdedup.cluster", "zhdedup.fp", "zhdedup.seen_at"]


def near_query(layout: BandLayout, fp: int, passages: Sequence[int] = (), passage_share: float = 0.2) -> dict[str, Any]:
    """Candidates: documents sharing a band key with ``fp`` (named ``bands``), or sharing enough of
    ``passages`` (named ``passages``); score = number of shared keys, so near pairs come first.
    """
    query = {"bool": {"should": [
        {"constant_score": {"filter": {"term": {f"zhdedup.{name}": value}}}} for name, value in layout.terms(fp).items()
    ], "minimum_should_match": 1, "_name": "bands"}}
    if not passages:
        return query
    keys = [format(key, "08x") for key in passages]
    passage_clause = {"bool": {"should": [{"constant_score": {"filter": {"term": {"zhdedup.passages": key}}}}
                                          for key in keys],
                               "minimum_should_match": votes_needed(len(keys), passage_share), "_name": "passages"}}
    return {"bool": {"should": [query, passage_clause], "minimum_should_match": 1}}


def repeat_id(content_hash: str, doc_id: str) -> str:
    """``_id`` of an exact repeat kept in annotate mode (the first copy owns ``_id = content_hash``)."""
    return f"{content_hash}-{hashlib.sha1(doc_id.encode('utf-8')).hexdigest()[:16]}"


def _transient(exc: Exception) -> bool:
    if isinstance(exc, (EsConnectionError, ConnectionTimeout)):
        return True
    return isinstance(exc, ApiError) and exc.meta.status in RETRY_STATUSES


def _require_asyncio_reactor() -> None:
    """This backend runs on asyncio; under Scrapy that needs Twisted's asyncio reactor."""
    if "twisted.internet.reactor" not in sys.modules:
        return  # no Twisted reactor: plain asyncio (e.g. `zhdedup es ingest`)
    from twisted.internet import reactor
    from twisted.internet.asyncioreactor import AsyncioSelectorReactor

    if not isinstance(reactor, AsyncioSelectorReactor):
        raise ZhDedupError(
            f"ZHDEDUP_BACKEND = 'elasticsearch' needs Twisted's asyncio reactor, but "
            f"{type(reactor).__module__}.{type(reactor).__name__} is installed: set "
            f'TWISTED_REACTOR = "{ASYNCIO_REACTOR}" in the Scrapy settings'
        )


@dataclass
class _Action:
    op: str  # "create" (first copy, _id = hash) or "index" (annotated exact repeat)
    id: str
    source: dict[str, Any]


@dataclass
class _Batch:
    """Documents buffered for one bulk request, indexed locally until searches can see them."""

    seq: int
    layout: BandLayout
    actions: list[_Action] = field(default_factory=list)
    hashes: dict[str, Match] = field(default_factory=dict)
    rows: list[Match] = field(default_factory=list)
    done: bool = False

    def __post_init__(self) -> None:
        self.near = BandIndex(self.layout)
        self.passages = KeyTable(np.uint32)


class ElasticsearchBackend:
    """The :class:`~scrapy_zhdedup.backends.Backend` on a shared Elasticsearch index."""

    def __init__(self, dedup: DedupConfig, es: EsConfig, *, stats: Any = None, index_duplicates: bool = False,
                 client: AsyncElasticsearch | None = None, backoff_base: float = 0.5,
                 backoff_cap: float = 30.0) -> None:
        if es.es_bulk_size < 1:
            raise ValueError(f"ZHDEDUP_ES_BULK_SIZE must be positive, got {es.es_bulk_size}")
        if es.es_flush_interval <= 0:
            raise ValueError(f"ZHDEDUP_ES_FLUSH_INTERVAL must be positive, got {es.es_flush_interval}")
        if es.es_max_retries < 0:
            raise ValueError(f"ZHDEDUP_ES_MAX_RETRIES must be >= 0, got {es.es_max_retries}")
        _require_asyncio_reactor()
        self.dedup, self.es = dedup, es
        self.layout = dedup.layout
        self.index = es.es_index
        self.index_duplicates = index_duplicates
        self.dead_letter_path = Path(es.es_dead_letter or DEFAULT_DEAD_LETTER)
        self.dead_lettered = 0
        self._stats = stats
        self._client = client
        self._own_client = client is None
        self._backoff = (backoff_base, backoff_cap)
        self._fingerprinter = Fingerprinter(dedup)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="zhdedup-es")
        self._bloom = ExactFilter(error_rate=dedup.bloom_error_rate, initial_capacity=dedup.bloom_capacity)
        self._batches: deque[_Batch] = deque([_Batch(0, self.layout)])
        self._sealed: deque[_Batch] = deque()
        self._visible_upto = 0  # batches with seq below this are visible to every new lookup
        self._active: Counter[int] = Counter()  # judgements in flight, by the _visible_upto they started at
        self._started = False
        self._closed = False
        self._start_lock = asyncio.Lock()
        self._wake = asyncio.Event()
        self._written = asyncio.Condition()
        self._tasks: list[asyncio.Task[None]] = []

    # -- the Backend protocol ---------------------------------------------------------------------

    async def judge(self, doc_id: str, *, text: str | None, html: str | bytes | None,
                    document: dict[str, Any]) -> Verdict:
        """Judge one item and buffer it for writing (unless it is a duplicate in drop mode).

        ``document`` (the item's fields) is stored beside the ``zhdedup`` fields; bytes values (a page
        body) are stored as text, decoded like the page.  Raises EmptyTextError for items without text,
        ValueError for a document Elasticsearch could not store, and EsUnavailableError (after
        dead-lettering the item) when lookups keep failing.
        """
        if self._closed:
            raise ZhDedupError("the Elasticsearch backend is closed")
        if "zhdedup" in document:
            raise ValueError(f"item {doc_id!r} has a field named 'zhdedup', which scrapy-zhdedup owns in the index")
        await self._start()
        document = {key: decode_html(value) if isinstance(value, bytes) else value
                    for key, value in document.items()}
        try:
            serializer = self._client.transport.serializers.get_serializer("application/json")  # type: ignore[union-attr]
            serializer.dumps(document)
        except SerializationError as exc:
            raise ValueError(f"item {doc_id!r} cannot be stored in Elasticsearch: {exc}") from exc
        loop = asyncio.get_running_loop()
        clean, digest = await loop.run_in_executor(self._executor, self._clean, text, html)
        features = None if digest in self._bloom else await self._features(clean)
        gen = self._visible_upto
        self._active[gen] += 1
        try:
            try:
                exact, near = self._local_exact(digest), None
                if exact is None and features is not None:  # probably new: both lookups at once
                    exact, near = await asyncio.gather(self._get_exact(digest), self._search_near(*features))
                elif exact is None:  # probably seen here before: the GET likely answers alone
                    exact = await self._get_exact(digest)
                    if exact is None:
                        features = await self._features(clean)
                        near = await self._search_near(*features)
            except (TransportError, ApiError) as exc:
                self._inc("errors")
                self._write_dead_letters([self._dead_record(None, doc_id, document, "lookup", exc)])
                raise EsUnavailableError(
                    f"zhdedup: looking up {doc_id!r} in Elasticsearch at {self.es.es_url} failed after "
                    f"{self.es.es_max_retries} retries ({exc}); the item was written to {self.dead_letter_path} "
                    f"and not judged"
                ) from exc
            verdict = self._decide_and_enqueue(doc_id, digest, features, exact, near, document, gen)
        finally:
            self._active[gen] -= 1
            if not self._active[gen]:
                del self._active[gen]
            self._prune()
        if len(self._sealed) >= MAX_SEALED:
            async with self._written:
                await self._written.wait_for(lambda: len(self._sealed) < MAX_SEALED)
        return verdict

    async def flush(self) -> None:
        """Write everything buffered and wait until it is visible to searches."""
        if not self._started:
            return
        # A batch sealed by size may still be on its way; writing can enqueue more (annotated losers of a 409 race).
        while self._batches[-1].actions or self._sealed:
            self._seal()
            async with self._written:
                await self._written.wait_for(lambda: not self._sealed)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            await self.flush()
        finally:
            for task in self._tasks:
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            if self._own_client and self._client is not None:
                await self._client.close()
            self._executor.shutdown(wait=False)
        if self.dead_lettered:
            logger.error("zhdedup: %d documents could not be stored in Elasticsearch; they are in %s",
                         self.dead_lettered, self.dead_letter_path)

    # -- start -------------------------------------------------------------------------------------

    async def _start(self) -> None:
        if self._started:
            return
        async with self._start_lock:
            if self._started:
                return
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:  # pragma: no cover - only reachable from a foreign event loop
                raise ZhDedupError(f'the Elasticsearch backend needs a running asyncio loop; under Scrapy set '
                                   f'TWISTED_REACTOR = "{ASYNCIO_REACTOR}"') from None
            if self._client is None:
                self._client = make_async_client(self.es, max_retries=0)  # we retry, with backoff and stats
            await acheck_reachable(self._client, self.es.es_url)
            # creating an index can take longer than a lookup's timeout
            setup = self._client.options(request_timeout=max(self.es.es_timeout, SETUP_TIMEOUT))
            report = await ainstall(setup, self.index, self.layout, replace=False)
            logger.info("zhdedup: Elasticsearch index %s: template %s, index %s", self.index,
                        report["template_action"], report["index_action"])
            self._tasks = [loop.create_task(self._writer()), loop.create_task(self._timer())]
            self._started = True

    # -- lookups -----------------------------------------------------------------------------------

    def _clean(self, text: str | None, html: str | bytes | None) -> tuple[str, str]:
        clean = self._fingerprinter.clean(text=text, html=html)
        return clean, content_hash(clean)

    def _fingerprint(self, clean: str) -> tuple[int, list[int]]:
        return self._fingerprinter.fingerprint(clean), self._fingerprinter.passages(clean)[:MAX_QUERY_PASSAGES]

    async def _features(self, clean: str) -> tuple[int, list[int]]:
        """Fingerprint and passage keys, on the worker thread."""
        return await asyncio.get_running_loop().run_in_executor(self._executor, self._fingerprint, clean)

    async def _retrying(self, call: Callable[[], Awaitable[T]]) -> T:
        attempt = 0
        while True:
            try:
                return await call()
            except (TransportError, ApiError) as exc:
                if not _transient(exc) or attempt >= self.es.es_max_retries:
                    raise
                attempt += 1
                self._inc("retries")
                await asyncio.sleep(self._delay(attempt))

    def _delay(self, attempt: int) -> float:
        base, cap = self._backoff
        return min(cap, base * 2 ** (attempt - 1)) * random.uniform(0.5, 1.0)

    def _local_exact(self, digest: str) -> Match | None:
        for batch in self._batches:
            match = batch.hashes.get(digest)
            if match is not None:
                return match
        return None

    async def _get_exact(self, digest: str) -> Match | None:
        """Realtime GET of the first copy: sees flushed documents before any refresh."""
        assert self._client is not None
        client = self._client
        self._inc("lookups")
        try:
            response = await self._retrying(
                lambda: client.get(index=self.index, id=digest, source_includes=_SOURCE[:2]))
        except NotFoundError:
            return None
        z = response["_source"]["zhdedup"]
        return Match(z["doc_id"], z["cluster"], 0)

    async def _search_near(self, fp: int, passages: list[int]) -> Match | None:
        assert self._client is not None
        client = self._client
        query = near_query(self.layout, fp, passages, self.dedup.passage_share)
        best: Match | None = None
        best_seen = ""
        offset = 0
        while best is None and offset < MAX_RESULT_WINDOW:
            self._inc("lookups")
            response = await self._retrying(lambda: client.search(
                index=self.index, query=query, size=SEARCH_PAGE, from_=offset, source_includes=_SOURCE,
                track_total_hits=False, include_named_queries_score=True))
            hits = response["hits"]["hits"]
            for hit in hits:
                z = hit["_source"]["zhdedup"]
                distance = hamming(int(z["fp"], 16), fp)
                if distance > self._max_distance(hit.get("matched_queries", {}), len(passages)):
                    continue
                seen = z.get("seen_at", "")
                if best is None or (distance, seen) < (best.distance, best_seen):  # ties: the oldest
                    best, best_seen = Match(z["doc_id"], z["cluster"], distance), seen
            if len(hits) < SEARCH_PAGE:
                break
            offset += SEARCH_PAGE
        return best

    def _max_distance(self, matched: dict[str, float], n_passages: int) -> int:
        """How far a candidate may be: k via the bands; via passages, the limit for the number shared
        (each matched passage clause scores 1, reported by ``include_named_queries_score``)."""
        limits = [self.layout.k] if "bands" in matched else []
        if "passages" in matched:
            limits.append(distance_limit(round(matched["passages"]), n_passages, self.dedup.passage_share,
                                         self.dedup.passage_threshold))
        return max(limits, default=-1)

    def _local_near(self, fp: int, passages: list[int], gen: int) -> Match | None:
        """Nearest buffered document among the batches a lookup that started at ``gen`` could not see,
        by the embedded store's own rule."""
        best: Match | None = None
        for batch in self._batches:
            if batch.seq < gen:
                continue
            hit = nearest_with_passages(batch.near, batch.passages, fp, passages,
                                        self.dedup.passage_share, self.dedup.passage_threshold)
            if hit is not None and (best is None or hit.distance < best.distance):
                row = batch.rows[hit.row]
                best = Match(row.doc_id, row.cluster, hit.distance)
        return best

    # -- decision and buffer ---------------------------------------------------------------------------

    def _decide_and_enqueue(self, doc_id: str, digest: str, features: tuple[int, list[int]] | None,
                            exact: Match | None, near: Match | None, document: dict[str, Any], gen: int) -> Verdict:
        """Synchronous on purpose: no other judgement can interleave between the decision and the enqueue."""
        exact = exact or self._local_exact(digest)  # an equal text may have been buffered meanwhile
        if exact is not None:
            verdict = verdict_for(doc_id, digest, None, exact, exact=True)
        else:
            assert features is not None
            fp, passages = features
            local = self._local_near(fp, passages, gen)
            match = local if near is None or (local is not None and local.distance < near.distance) else near
            verdict = verdict_for(doc_id, digest, fp, match)
        self._bloom.add(digest)
        if verdict.status == "exact":
            if self.index_duplicates:
                self._enqueue(_Action("index", repeat_id(digest, doc_id), self._source(verdict, document)))
        elif verdict.status == "unique" or self.index_duplicates:
            fp, passages = features  # type: ignore[misc]
            batch = self._batches[-1]
            own = Match(doc_id, verdict.cluster, 0)
            batch.hashes[digest] = own
            row = batch.near.add(fp)
            batch.passages.add_many(passages, row)
            batch.rows.append(own)
            self._enqueue(_Action("create", digest, self._source(verdict, document, passages)))
        return verdict

    def _source(self, verdict: Verdict, document: dict[str, Any], passages: list[int] | None = None) -> dict[str, Any]:
        fields = zhdedup_fields(verdict, self.layout, datetime.now(timezone.utc), passages=passages)
        return {**document, "zhdedup": fields}

    def _enqueue(self, action: _Action) -> None:
        batch = self._batches[-1]
        batch.actions.append(action)
        if len(batch.actions) >= self.es.es_bulk_size:
            self._seal()

    def _seal(self) -> None:
        """Hand the open batch to the writer and open a new one."""
        batch = self._batches[-1]
        if not batch.actions:
            return
        self._sealed.append(batch)
        self._batches.append(_Batch(batch.seq + 1, self.layout))
        self._wake.set()

    def _prune(self) -> None:
        """Forget written batches that no judgement in flight may still need."""
        floor = min(self._active, default=self._visible_upto)
        while self._batches[0].done and self._batches[0].seq < floor:
            self._batches.popleft()

    # -- writing ---------------------------------------------------------------------------------------

    async def _timer(self) -> None:
        while True:
            await asyncio.sleep(self.es.es_flush_interval)
            self._seal()

    async def _writer(self) -> None:
        """Writes sealed batches one at a time, in order, so visibility advances batch by batch."""
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._sealed:
                batch = self._sealed[0]
                try:
                    await self._write(batch)
                except Exception as exc:  # a bug here must not leave documents unwritten and unreported
                    logger.exception("zhdedup: unexpected error writing a bulk batch")
                    self._write_dead_letters([self._dead_record(a, None, a.source, "bulk", exc) for a in batch.actions])
                batch.done = True
                self._visible_upto = batch.seq + 1
                self._sealed.popleft()
                self._prune()
                async with self._written:
                    self._written.notify_all()

    async def _write(self, batch: _Batch) -> None:
        assert self._client is not None
        pending, attempt = list(batch.actions), 0
        while pending:
            operations: list[dict[str, Any]] = []
            for action in pending:
                operations += [{action.op: {"_index": self.index, "_id": action.id}}, action.source]
            try:
                response = await self._client.bulk(operations=operations, refresh=True)
            except (TransportError, ApiError) as exc:
                if _transient(exc) and attempt < self.es.es_max_retries:
                    attempt += 1
                    self._inc("retries")
                    await asyncio.sleep(self._delay(attempt))
                    continue
                self._inc("errors", len(pending))
                self._write_dead_letters([self._dead_record(a, None, a.source, "bulk", exc) for a in pending])
                return
            retry, dead, conflicts = [], [], []
            for action, item in zip(pending, response["items"]):
                result = next(iter(item.values()))
                status = result["status"]
                if status < 300:
                    self._inc("indexed")
                elif status == 409 and action.op == "create":
                    conflicts.append(action)
                elif status in RETRY_STATUSES or result.get("error", {}).get("type") == "cluster_block_exception":
                    retry.append((action, result))
                else:
                    dead.append((action, result))
            if retry and attempt >= self.es.es_max_retries:
                dead += retry
                retry = []
            if dead:
                self._inc("errors", len(dead))
                self._write_dead_letters([self._dead_record(a, None, a.source, "bulk", r) for a, r in dead])
            await self._resolve_conflicts(batch, conflicts)
            pending = [a for a, _ in retry]
            if pending:
                attempt += 1
                self._inc("retries", len(pending))
                await asyncio.sleep(self._delay(attempt))

    async def _resolve_conflicts(self, batch: _Batch, conflicts: list[_Action]) -> None:
        """A 409 on ``create``: the text is stored already, by another writer or by our own earlier attempt."""
        for action in conflicts:
            ours = action.source["zhdedup"]
            try:
                first = await self._get_exact(action.id)
            except (TransportError, ApiError) as exc:
                self._inc("errors")
                self._write_dead_letters([self._dead_record(action, None, action.source, "conflict", exc)])
                continue
            if first is None:  # deleted since the 409: write ours again
                self._enqueue(action)
                continue
            if first.doc_id == ours["doc_id"]:  # our retried write landed the first time
                self._inc("indexed")
                continue
            self._inc("conflicts")
            batch.hashes[action.id] = first
            logger.info("zhdedup: %s was judged %s, but another writer stored the same text first as %s",
                        ours["doc_id"], ours["status"], first.doc_id)
            if self.index_duplicates:
                verdict = verdict_for(ours["doc_id"], action.id, None, first, exact=True)
                document = {k: v for k, v in action.source.items() if k != "zhdedup"}
                self._enqueue(_Action("index", repeat_id(action.id, ours["doc_id"]), self._source(verdict, document)))

    # -- dead letters and stats ------------------------------------------------------------------------

    def _dead_record(self, action: _Action | None, doc_id: str | None, document: dict[str, Any], stage: str,
                     error: Exception | dict[str, Any]) -> dict[str, Any]:
        if isinstance(error, dict):  # a bulk item result
            status, reason = error.get("status"), json.dumps(error.get("error"), ensure_ascii=False)
        else:
            status, reason = getattr(getattr(error, "meta", None), "status", None), f"{type(error).__name__}: {error}"
        if doc_id is None:
            doc_id = document.get("zhdedup", {}).get("doc_id")
        return {
            "time": datetime.now(timezone.utc).isoformat(timespec="milliseconds"), "index": self.index,
            "stage": stage, "op": action.op if action else None, "_id": action.id if action else None,
            "doc_id": doc_id, "status": status, "reason": reason, "document": document,
        }

    def _write_dead_letters(self, records: list[dict[str, Any]]) -> None:
        if not records:
            return
        self.dead_letter_path.parent.mkdir(parents=True, exist_ok=True)
        with self.dead_letter_path.open("a", encoding="utf-8") as fh:
            for record in records:
                fh.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")
        self.dead_lettered += len(records)
        self._inc("dead_letter", len(records))
        logger.error("zhdedup: %d document(s) not stored in Elasticsearch (%s: %.300s); written to %s",
                     len(records), records[0]["stage"], records[0]["reason"], self.dead_letter_path)

    def _inc(self, name: str, count: int = 1) -> None:
        if self._stats is not None:
            self._stats.inc_value(f"zhdedup/es/{name}", count)
