"""When the backend sends what: lookup batches (groupcommit.py) and bulks (buffer.py).  No node needed."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from es_plugin.backend.buffer import MAX_BULK_BYTES, BulkBuffer, PendingBatch, size_of
from es_plugin.backend.groupcommit import IN_ORDER_DEPTH, LookupWindow
from es_plugin.backend.writer import Action
from scrapy_zhdedup.config import DedupConfig
from scrapy_zhdedup.errors import ZhDedupError
from scrapy_zhdedup.index.nearindex import CandidateKeys
from scrapy_zhdedup.similarity.rule import NearRule


def test_a_batch_is_sealed_by_size_before_it_is_full() -> None:
    """Pages of ~3 MB: a bulk stays under ~16 MB, not ``bulk_size`` of them (~3 GB, refused by the node);
    a page larger than that goes alone, so the node's 413 for it is not its neighbours'."""
    config, page, huge = DedupConfig(), "中" * 1_000_000, "中" * 6_000_000
    written: list[list[str]] = []

    class Sink:
        async def write(self, batch: PendingBatch) -> list[Action]:
            written.append([action.id for action in batch.actions])
            return []

        async def refresh(self) -> None:
            pass

    async def run() -> None:
        buffer = BulkBuffer(CandidateKeys.from_config(config), NearRule.from_config(config), bulk_size=1000,
                            flush_interval=60)
        buffer.start(Sink())
        for i in range(13):
            buffer.enqueue(Action("create", f"d{i}", {"text": page}))
            if i == 6:
                buffer.enqueue(Action("create", "huge", {"text": huge}))
        await buffer.flush()
        await buffer.stop()

    asyncio.run(run())
    assert MAX_BULK_BYTES // size_of({"text": page}) == 5 and size_of({"text": huge}) > MAX_BULK_BYTES
    assert [len(ids) for ids in written] == [5, 2, 1, 5, 1]
    assert written[2] == ["huge"] and [i for ids in written for i in ids if i != "huge"] == [f"d{i}" for i in range(13)]


def test_in_order_batches_are_full_and_overlap_two_at_most_in_arrival_order() -> None:
    """``window=None`` (es ingest): 150 items in flight, at most 64 a batch; a full batch starts while the one
    before it is in flight (two at most), the partial last one only once none is; they start in arrival order."""
    batches: list[list[int]] = []
    running: list[int] = []
    overlapped = []

    async def judge_many(entries: Any) -> Any:
        running.append(len(entries))
        assert len(running) <= IN_ORDER_DEPTH, "more lookup batches at once than IN_ORDER_DEPTH"
        assert len(entries) == 64 or len(running) == 1, "a partial batch beside another"
        overlapped.append(len(running))
        batches.append([entry[0] for entry in entries])
        await asyncio.sleep(0.01)
        running.pop()
        return [entry[0] for entry in entries]

    async def run() -> list[Any]:
        window = LookupWindow(judge_many, None, 64)
        return await asyncio.gather(*(window.submit((i, {}, None)) for i in range(150)))  # type: ignore[arg-type]

    assert asyncio.run(run()) == list(range(150))
    assert [len(b) for b in batches] == [64, 64, 22] and overlapped == [1, 2, 1]
    assert [i for b in batches for i in b] == list(range(150))


def test_a_cancelled_run_starts_no_batch_for_the_items_of_cancelled_submitters() -> None:
    """Ctrl-C: asyncio.run cancels every task at once, the batches in flight and the items waiting for the
    next; a batch ending cancelled must not start one for those items (a task nobody would cancel, running on
    a closed client when the loop closes: the stray lines after ``es ingest``'s one-line message)."""
    started: list[int] = []

    async def judge_many(entries: Any) -> list[Any]:
        started.append(len(entries))
        await asyncio.sleep(3600)
        return []

    async def run() -> set[asyncio.Task[Any]]:
        window = LookupWindow(judge_many, None, 4)
        submitters = [asyncio.ensure_future(window.submit((i, {}, None))) for i in range(20)]  # type: ignore[arg-type]
        while len(started) < IN_ORDER_DEPTH:
            await asyncio.sleep(0)
        others = asyncio.all_tasks() - {asyncio.current_task()}
        for task in others:  # what asyncio.run does to every task left when its main task ends
            task.cancel()
        await asyncio.gather(*others, return_exceptions=True)
        await asyncio.sleep(0)
        assert all(s.cancelled() for s in submitters)
        return asyncio.all_tasks() - {asyncio.current_task()}

    assert asyncio.run(run()) == set()
    assert started == [4] * IN_ORDER_DEPTH


def test_a_large_batch_goes_in_parts_that_keep_each_document_in_one_part_in_order() -> None:
    """A node indexes one bulk request of a one-shard index on one thread: a batch of 1,000 goes as two
    requests at once, and actions on one document (an update after its create) stay together, in order."""
    from es_plugin.backend.batchwriter import MIN_BULK_PART, bulk_parts

    actions = [Action("create", f"d{i}", {"n": i}) for i in range(1000)]
    actions += [Action("update", f"d{i}", {"after": i}) for i in range(0, 1000, 7)]
    parts = bulk_parts(actions)
    assert len(parts) == 2 and sorted(map(len, parts)) != [0, len(actions)]
    assert sorted(id(a) for part in parts for a in part) == sorted(id(a) for a in actions)
    for part in parts:
        assert part == [a for a in actions if a in part]  # each part keeps the batch's order
        assert not {a.id for a in part} & {a.id for other in parts if other is not part for a in other}
    assert bulk_parts(actions[: 2 * MIN_BULK_PART - 1]) == [actions[: 2 * MIN_BULK_PART - 1]]
    assert bulk_parts([]) == [[]]


def test_a_writer_task_that_fails_outside_write_stops_every_waiter_instead_of_hanging() -> None:
    """An error after a batch was written (here: the journal's bookkeeping) ends the writer task; ``flush``
    raises it instead of waiting for a writer that is gone."""
    config = DedupConfig()

    class Sink:
        async def write(self, batch: PendingBatch) -> list[Action]:
            return []

        async def refresh(self) -> None:
            pass

    class BrokenJournal:
        def record(self, seq: int, action: Action) -> None:
            pass

        def done(self, seq: int) -> None:
            raise RuntimeError("bookkeeping failed")

    async def run() -> None:
        buffer = BulkBuffer(CandidateKeys.from_config(config), NearRule.from_config(config), bulk_size=2,
                            flush_interval=60, journal=BrokenJournal())  # type: ignore[arg-type]
        buffer.start(Sink())
        for i in range(3):
            buffer.enqueue(Action("create", f"d{i}", {"text": "正文"}))
        with pytest.raises(ZhDedupError, match="bookkeeping failed; 1 more judged document"):
            await asyncio.wait_for(buffer.flush(), timeout=30)
        await buffer.stop()

    asyncio.run(run())
