"""Cleaning, segmentation and fingerprints on every core; decisions stay in one process, in order.

:class:`PreparePool` runs a step (``step(fingerprinter, item) -> result``, a module-level function so
it pickles by name) in ``workers`` processes, each with its own :class:`~scrapy_zhdedup.similarity.fingerprinter.Fingerprinter`
and caches, and yields the results **in input order**, so the caller judges exactly as it would in one
process.  Items travel in chunks (fewer, larger messages) and at most ``window`` chunks are in flight,
so memory stays bounded however long the input.  An error of one item (an empty text, a bad page)
comes back as that item's value, never as a dead pool.  With ``workers=1`` the step runs in this
process, a chunk at a time as it is read: the same results, no processes.  Either way the features of a
chunk's documents are computed together, in one batch of numpy calls (:func:`_prepared`), unless they are
word features in this process (then the judge computes them as before, and never for an exact repeat).

Processes are started with ``spawn`` unless the caller asks for ``fork``: the Scrapy pipeline and
``es dedup-index`` run threads, an event loop or connections, which ``fork`` would copy in an
undefined state.  ``zhdedup scan`` and ``es ingest`` open their pool first, with one thread and
nothing open, and ask for ``fork``: their workers then start with the modules already imported
instead of importing them again (~0.4 s each), and with jieba's dictionary and IDF table when the
fingerprints need words, which the parent then loads first (~0.3 s and ~90 MiB, once instead of once per
worker; the pages stay shared; a caller whose step segments for another reason, such as Elasticsearch's
words field, loads them itself before entering the pool).  The default fingerprint needs no words, and
nothing of jieba is loaded unless a step segments.
A forked pool's workers are ready to work when it is entered: what ``scan`` and ``es ingest`` time after
that is their throughput, not their start-up.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import logging
import os
import signal
import sys
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, Generic, Literal, NamedTuple, TypeVar

from .config import DedupConfig
from .errors import ConfigError, ZhDedupError
from .garbage_collector import COLLECTOR
from .model import Featurize, Prepared
from .similarity.fingerprinter import Fingerprinter

if TYPE_CHECKING:
    from concurrent.futures import ProcessPoolExecutor

# multiprocessing and concurrent.futures.process (~25 ms to import, a tenth of `zhdedup scan`'s start-up)
# are imported where worker processes are started or their failures caught: a run with one worker never is.

In = TypeVar("In")
Out = TypeVar("Out")
Step = Callable[[Fingerprinter, In], Out]
Texts = bool | Literal["written"]  # the texts of a Prepared a worker sends back: both, none, or the written one

# Items per message to a worker: 64, not 16, made `zhdedup scan --workers 2` of 3,000 news documents 5 %
# faster in 5 of 5 interleaved pairs (fewer messages for the parent's threads to pickle and wake for);
# `es ingest` was unchanged.  Also the batch whose features are computed together: per news article, 64 cost
# ~80 µs where 16 cost ~95 and one at a time ~200 (benchmarks/README.md, issue 40).
CHUNK = 64
WINDOW_PER_WORKER = 4  # chunks in flight per worker

_fingerprinter: Fingerprinter | None = None  # one per worker process
logger = logging.getLogger(__name__)


class Job(NamedTuple):
    """A document to prepare: its id, and its text or page (the page wins)."""

    doc_id: str
    text: str | None
    html: str | bytes | None


def default_workers() -> int:
    """The machine's cores (as this process may use them)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def add_workers_option(parser: argparse.ArgumentParser) -> None:
    """``--workers N`` for every command that prepares documents (``scan``, ``es ingest``, ``es dedup-index``)."""
    parser.add_argument("--workers", type=int, default=default_workers(), metavar="N",
                        help="processes that clean and fingerprint documents; verdicts are the same for "
                             "any N (default: the machine's cores, %(default)s)")


def prepare_job(fingerprinter: Fingerprinter, job: Job) -> Prepared:
    """The step of ``zhdedup scan`` and the embedded backend's workers: a :class:`Job` → Prepared."""
    return fingerprinter.prepare(job.doc_id, text=job.text, html=job.html)


def _travelling(result: Any, text: Texts, featurize: Featurize) -> Any:
    """A worker's result as it is sent back, its documents' features computed (:func:`_prepared`): their texts
    stay behind unless the caller uses them (most of the bytes sent back)."""
    if isinstance(result, tuple):  # a record of results: a NamedTuple stays one
        values = [_travelling(value, text, featurize) for value in result]
        return result._make(values) if hasattr(result, "_make") else tuple(values)
    if isinstance(result, Prepared) and text is not True:
        return result.without_text(featurize, written=text == "written")
    return result


def _documents(results: Iterable[Any]) -> Iterator[Prepared]:
    """The prepared documents in a chunk's results (a step may return them inside a record)."""
    for result in results:
        if isinstance(result, Prepared):
            yield result
        elif isinstance(result, tuple):
            yield from _documents(result)


def _prepared(step: Step[In, Out], fingerprinter: Fingerprinter, chunk: list[In], *,
              featured: bool = True) -> list[Out | Exception]:
    """The step over a chunk of items, then (``featured``) the features of all its documents in one batch
    (:meth:`~scrapy_zhdedup.similarity.fingerprinter.Fingerprinter.featured`: about half the CPU of computing
    them one at a time on news articles, a sixth on short texts; benchmarks/README.md, issue 40).  An exact
    repeat's are computed too: a batch is cheaper than finding out which document will need them."""
    results = [_guarded(step, fingerprinter, item) for item in chunk]
    if featured:
        fingerprinter.featured(_documents(results))
    return results


def _init(config: DedupConfig) -> None:
    global _fingerprinter
    _fingerprinter = Fingerprinter(config)
    _load_dictionaries(_fingerprinter)  # a spawned worker's; a forked one has its parent's
    COLLECTOR.freeze()  # a spawned worker's modules, as the parent's before a fork (PreparePool._processes)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group: the parent stops the pool
    import multiprocessing

    parent = multiprocessing.parent_process()
    if parent is not None:
        threading.Thread(target=_exit_with, args=(parent.sentinel,), daemon=True).start()


def _load_dictionaries(fingerprinter: Fingerprinter) -> None:
    """jieba's dictionary and IDF table, if the fingerprints need words (words.py is imported only then)."""
    if fingerprinter.segments:
        from .similarity.words import load_dictionaries

        load_dictionaries()


def _exit_with(parent_sentinel: int) -> None:
    """A parent killed hard (kill -9) cannot stop its pool, and a worker waiting for work would wait
    forever: it leaves when the parent's sentinel says the parent is gone."""
    import multiprocessing.connection

    multiprocessing.connection.wait([parent_sentinel])
    os._exit(1)


def _run_chunk(step: Step[In, Out], chunk: list[In], text: Texts) -> list[Out | Exception]:
    assert _fingerprinter is not None
    return [_travelling(result, text, _fingerprinter.features) for result in _prepared(step, _fingerprinter, chunk)]


def _guarded(step: Step[In, Out], fingerprinter: Fingerprinter, item: In) -> Out | Exception:
    try:
        return step(fingerprinter, item)
    except (ZhDedupError, ValueError, OSError) as exc:  # this item's problem; a bug still propagates
        return exc


class PreparePool(Generic[In, Out]):
    """``step`` over an input stream on ``workers`` processes, results in input order.

    Use as a context manager (the processes stop on exit)::

        with PreparePool(config, prepare_record, workers=4) as pool:
            for record, result in zip(records, pool.map(records)): ...

    ``result`` is the step's return value or the exception it raised (ZhDedupError, ValueError or
    OSError): one bad item is one bad line.  With ``text=False`` a worker sends documents back
    without their texts (:meth:`~scrapy_zhdedup.model.Prepared.without_text`), with ``text="written"``
    with only the text as written (what the Elasticsearch backend stores), for a caller
    that only judges them.
    """

    def __init__(self, config: DedupConfig, step: Step[In, Out], workers: int | None = None,
                 chunk: int = CHUNK, *, fork: bool = False, text: Texts = True) -> None:
        self.workers = default_workers() if workers is None else workers
        if self.workers < 1:
            raise ConfigError(f"workers must be at least 1, got {self.workers}")
        self.config, self.step, self.chunk = config, step, chunk
        self.fork = fork  # asked for; used only while this process has one thread (see _start_method)
        self.text = text
        self._local: Fingerprinter | None = None
        self._executor: ProcessPoolExecutor | None = None
        self._replacing = threading.Lock()  # send() runs on the event loop and on a judging thread

    def __enter__(self) -> PreparePool[In, Out]:
        if self.workers == 1:
            self._local = Fingerprinter(self.config)
            _load_dictionaries(self._local)
        else:
            self._executor = self._processes()
        return self

    def _processes(self) -> ProcessPoolExecutor:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        method = self._start_method()
        if method == "fork":
            _load_dictionaries(Fingerprinter(self.config))  # once, shared by the children (copy-on-write), not in each
            # What exists now (the imported modules) lives as long as the run: frozen, the garbage collector
            # never scans it again, here or in the children, whose collections would otherwise write to (and
            # so copy) every page of it.  Full collections of `es ingest` fell from 0.28 to 0.06 s.
            COLLECTOR.freeze()
        executor = ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context(method),
                                       initializer=_init, initargs=(self.config,))
        if method == "fork":
            executor.submit(int).result()  # forks every worker now, before the caller opens a store or a file
        return executor

    def _start_method(self) -> str:
        """``fork`` when asked and safe: one thread in this process (a second one may hold a lock the
        children would inherit held), and Python >= 3.11, whose pool forks all its workers before
        starting its own thread (cpython#90622).  Otherwise ``spawn``."""
        import multiprocessing

        safe = sys.version_info >= (3, 11) and threading.active_count() == 1
        return "fork" if self.fork and safe and "fork" in multiprocessing.get_all_start_methods() else "spawn"

    def __exit__(self, *exc: Any) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)
            self._executor = None

    def map(self, items: Iterable[In]) -> Iterator[Out | Exception]:
        """One result per item, in input order; reads ``items`` only as far as the window allows."""
        source = iter(items)
        if self._local is not None:  # features left to the judge when made one text at a time (words)
            while chunk := list(itertools.islice(source, self.chunk)):
                yield from _prepared(self.step, self._local, chunk, featured=self._local.batches)
            return
        if self._executor is None:
            raise RuntimeError("PreparePool.map used outside its with block")
        in_flight: deque[Future[list[Out | Exception]]] = deque()
        while chunk := list(itertools.islice(source, self.chunk)):
            in_flight.append(self._executor.submit(_run_chunk, self.step, chunk, self.text))
            if len(in_flight) >= self.workers * WINDOW_PER_WORKER:
                yield from in_flight.popleft().result()
        while in_flight:
            yield from in_flight.popleft().result()

    def send(self, items: Sequence[In], futures: Sequence[Future[Out | Exception]]) -> None:
        """Prepare ``items`` on the worker processes, each result (or the error that lost it) into its
        future: one message per worker, not one per item (~0.1 ms of this process's CPU per news
        document instead of ~0.3), for callers that get items as they come (:class:`TurnBatcher`).

        A pool broken by a worker that died (killed, out of memory) is replaced by a new one here, so
        one lost process costs the items it held a second send (:func:`prepared_by`), not the crawl.
        """
        share = -(-len(items) // self.workers)  # every worker gets a part
        for start in range(0, len(items), share):
            part = list(items[start : start + share])
            self._submit_chunk(part).add_done_callback(functools.partial(_spread, futures[start : start + share]))

    def _submit_chunk(self, chunk: list[In]) -> Future[list[Out | Exception]]:
        from concurrent.futures.process import BrokenProcessPool

        with self._replacing:
            if self._executor is None:
                raise RuntimeError("PreparePool.send needs worker processes (workers > 1), inside its with block")
            try:
                return self._executor.submit(_run_chunk, self.step, chunk, self.text)
            except BrokenProcessPool:
                logger.warning("zhdedup: a worker process died; starting %d new ones", self.workers)
                self._executor.shutdown(wait=False, cancel_futures=True)
                self._executor = self._processes()
                return self._executor.submit(_run_chunk, self.step, chunk, self.text)


def _spread(futures: Sequence[Future[Out | Exception]], chunk: Future[list[Out | Exception]]) -> None:
    """A chunk's results to its items' futures, or the error that lost it (a chunk cancelled by the
    replacement of a broken pool counts as lost with it: :func:`prepared_by` sends its items again)."""
    from concurrent.futures.process import BrokenProcessPool

    error = BrokenProcessPool("the pool was replaced") if chunk.cancelled() else chunk.exception()
    if error is not None:
        for future in futures:
            future.set_exception(error)
        return
    for future, result in zip(futures, chunk.result()):
        future.set_result(result)


class TurnBatcher(Generic[In, Out]):
    """Items submitted in one turn of the caller's event loop go to the workers together.

    The pipeline gets items one at a time, but the items of one turn (those a lookup batch released,
    say) arrive together: :meth:`submit` answers each with a future at once and sends them all at the
    end of the turn, from the callback ``schedule`` runs next (``loop.call_soon`` on asyncio,
    Scrapy's ``CallLaterOnce`` on any reactor).
    """

    def __init__(self, pool: PreparePool[In, Out], schedule: Callable[[Callable[[], None]], object]) -> None:
        self.pool, self._schedule = pool, schedule
        self._items: list[In] = []
        self._futures: list[Future[Out | Exception]] = []

    def submit(self, item: In) -> Future[Out | Exception]:
        if not self._items:
            self._schedule(self._send)
        future: Future[Out | Exception] = Future()
        self._items.append(item)
        self._futures.append(future)
        return future

    def _send(self) -> None:
        items, futures = self._items, self._futures
        self._items, self._futures = [], []
        try:
            self.pool.send(items, futures)
        except Exception as exc:  # the pool is closed: each item's future says so
            for future in futures:
                future.set_exception(exc)


def prepared_by(pool: PreparePool[In, Out], future: Future[Out | Exception], item: In) -> Out:
    """What ``future`` (:meth:`TurnBatcher.submit`) gives, waited for on this thread; raises what
    preparing ``item`` raised.  Sent again once if its worker died on the way."""
    from concurrent.futures.process import BrokenProcessPool

    try:
        result = future.result()
    except BrokenProcessPool:
        again: Future[Out | Exception] = Future()
        pool.send([item], [again])
        result = again.result()
    if isinstance(result, Exception):
        raise result
    return result
