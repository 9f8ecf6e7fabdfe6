"""The embedded backend's judging thread (pipelines/batches.py): items that arrive together are judged in one
hand-off, in arrival order, with the verdicts they get one at a time (issue 40)."""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from scrapy_zhdedup import DedupConfig, Deduper, EmptyTextError
from scrapy_zhdedup.model import Prepared, Verdict
from scrapy_zhdedup.pipelines.backends import INLINE_BYTES, SNAPSHOT_MARGIN, EmbeddedBackend
from scrapy_zhdedup.pipelines.batches import JudgingThread
from scrapy_zhdedup.workers import Job, prepare_job
from tests.support import zhtexts
from tests.support.zhtexts import news_page


class _Call:
    def __init__(self, loop: asyncio.AbstractEventLoop, delay: float, fn: Callable[[], object]) -> None:
        self.fired = False
        self.handle = loop.call_later(delay, self._fire, fn)

    def _fire(self, fn: Callable[[], object]) -> None:
        self.fired = True
        fn()

    def active(self) -> bool:
        return not (self.fired or self.handle.cancelled())

    def cancel(self) -> None:
        self.handle.cancel()


class LoopReactor:
    """What JudgingThread uses of a reactor (callLater, callFromThread), on the test's asyncio loop."""

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()

    def callLater(self, delay: float, fn: Callable[[], object]) -> _Call:
        return _Call(self.loop, delay, fn)

    def callFromThread(self, fn: Callable[..., object], *args: Any) -> None:
        self.loop.call_soon_threadsafe(fn, *args)


def _doubled(calls: list[tuple[list[int], str]], items: list[int]) -> list[int | Exception]:
    calls.append((list(items), threading.current_thread().name))
    return [ValueError(f"bad {i}") if i == 3 else 2 * i for i in items]


async def test_items_submitted_together_go_in_one_hand_off_in_order_each_with_its_own_result() -> None:
    calls: list[tuple[list[int], str]] = []
    thread = JudgingThread(functools.partial(_doubled, calls), "judging-test", window=0.01, limit=4,
                           reactor=LoopReactor())
    try:
        results = await asyncio.gather(*(thread.submit(i) for i in range(6)), return_exceptions=True)
        assert [c[0] for c in calls] == [[0, 1, 2, 3], [4, 5]]  # at most `limit`; the rest in the next hand-off
        assert {c[1] for c in calls} == {"PoolThread-judging-test-0"}  # on the thread, not the event loop
        assert results[:3] == [0, 2, 4] and results[4:] == [8, 10]
        assert isinstance(results[3], ValueError) and str(results[3]) == "bad 3"  # one item's error, its own
        assert await thread.submit(7) == 14 and calls[-1][0] == [7]  # alone: when the window closes
    finally:
        await thread.close(lambda: None)


async def test_a_cheap_batch_is_judged_on_the_event_loop_a_costly_one_on_the_thread() -> None:
    calls: list[tuple[list[int], str]] = []
    thread = JudgingThread(functools.partial(_doubled, calls), "judging-test", window=0.01, reactor=LoopReactor(),
                           here=lambda items: sum(items) <= 10)
    try:
        assert await asyncio.gather(thread.submit(1), thread.submit(2)) == [2, 4]
        assert await asyncio.gather(thread.submit(10), thread.submit(20)) == [20, 40]
        assert calls == [([1, 2], threading.current_thread().name), ([10, 20], "PoolThread-judging-test-0")]
    finally:
        await thread.close(lambda: None)


async def test_items_arriving_while_a_batch_is_judged_go_together_when_it_returns() -> None:
    started, release = threading.Event(), threading.Event()
    calls: list[list[int]] = []

    def judge_many(items: list[int]) -> list[int | Exception]:
        calls.append(list(items))
        started.set()
        release.wait(5)
        return list(items)

    thread = JudgingThread(judge_many, "judging-test", reactor=LoopReactor())
    try:
        first = asyncio.ensure_future(thread.submit(0))
        await asyncio.get_running_loop().run_in_executor(None, started.wait, 5)
        later = [asyncio.ensure_future(thread.submit(i)) for i in (1, 2, 3)]
        await asyncio.sleep(0.05)
        assert calls == [[0]]  # one batch at a time: the thread is busy
        release.set()
        assert await asyncio.gather(first, *later) == [0, 1, 2, 3]
        assert calls == [[0], [1, 2, 3]]
    finally:
        release.set()
        await thread.close(lambda: None)


async def test_an_item_cancelled_while_it_waits_leaves_the_others_of_its_batch_their_results() -> None:
    thread = JudgingThread(lambda items: [2 * i for i in items], "judging-test", window=0.02, reactor=LoopReactor())
    try:
        first, second, third = (asyncio.ensure_future(thread.submit(i)) for i in (1, 2, 3))
        await asyncio.sleep(0)
        second.cancel()
        assert await asyncio.gather(first, third) == [2, 6] and second.cancelled()
        assert await thread.submit(4) == 8  # the thread goes on
    finally:
        await thread.close(lambda: None)


def _pages() -> list[tuple[str, str]]:
    a, b, c = zhtexts.articles(3)
    pages = [("a", news_page(a.title, a.text)), ("b", news_page(b.title, b.text)),
             ("a-copy", news_page(a.title, a.text)), ("empty", "<html><body></body></html>"),
             ("a-typo", news_page(a.title, zhtexts.edit_chars(a.text, 1, seed=7), site="caijing")),
             ("c", news_page(c.title, c.text)), ("b-again", news_page(b.title, b.text, site="caijing"))]
    return pages


def test_a_batch_gets_the_verdicts_of_one_item_at_a_time() -> None:
    """The backend's batch (features made together, then judged in order) against Deduper.judge item by item."""
    alone = Deduper(DedupConfig())
    expected: list[Verdict | type[Exception]] = []
    for doc_id, html in _pages():
        try:
            expected.append(alone.judge(doc_id, html=html))
        except EmptyTextError:
            expected.append(EmptyTextError)
    backend = EmbeddedBackend(DedupConfig(), None)
    try:
        fingerprinter = backend.deduper.fingerprinter
        jobs: list[tuple[Callable[[], Prepared], int]] = [
            (functools.partial(prepare_job, fingerprinter, Job(doc_id, None, html)), len(html))
            for doc_id, html in _pages()]
        got = backend._judge_many(jobs)
    finally:
        backend.deduper.close()
    assert [type(v) if isinstance(v, Exception) else v for v in got] == expected
    assert [v.status for v in expected if isinstance(v, Verdict)] == ["unique", "unique", "exact", "near", "unique",
                                                                     "exact"]


@pytest.mark.parametrize("window", [0.0, 0.02])
async def test_close_runs_last_on_the_thread_after_the_items(window: float) -> None:
    order: list[str] = []
    thread = JudgingThread(lambda items: [order.append(f"item {i}") or i for i in items], "judging-test",
                           window=window, reactor=LoopReactor())
    assert await asyncio.gather(thread.submit(1), thread.submit(2)) == [1, 2]
    await thread.close(lambda: order.append(threading.current_thread().name))
    assert order == ["item 1", "item 2", "PoolThread-judging-test-0"]


def test_the_reactor_judges_a_batch_of_short_pages_unless_it_may_write_a_snapshot(tmp_path: Path) -> None:
    backend = EmbeddedBackend(DedupConfig(), tmp_path / "store")
    try:
        def job() -> Prepared:
            raise AssertionError("not prepared to decide")

        store = backend.deduper.store
        assert backend._cheap([(job, 5_000)] * 8)
        assert not backend._cheap([(job, INLINE_BYTES // 2 + 1)] * 2)  # a long page goes to the thread
        store.compact_after_bytes = SNAPSHOT_MARGIN - 1  # the log close to its snapshot: the thread writes it
        assert store.saves_within(SNAPSHOT_MARGIN) and not backend._cheap([(job, 5_000)])
    finally:
        backend.deduper.close()
