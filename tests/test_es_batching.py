"""When the backend sends what: lookup batches (window.py) and bulks (buffer.py).  No node needed."""

from __future__ import annotations

import asyncio
from typing import Any

from es_plugin.buffer import MAX_BULK_BYTES, BulkBuffer, PendingBatch, size_of
from es_plugin.window import LookupWindow
from es_plugin.writer import Action
from scrapy_zhdedup.config import DedupConfig


def test_a_batch_is_sealed_by_size_before_it_is_full() -> None:
    """Pages of ~3 MB: a bulk goes at ~16 MB, not after ``bulk_size`` of them (~3 GB, refused by the node)."""
    config, page = DedupConfig(), "中" * 1_000_000
    written: list[int] = []

    async def write(batch: PendingBatch) -> None:
        written.append(len(batch.actions))

    async def run() -> None:
        buffer = BulkBuffer(config.layout, config.rule, passage_share=config.passage_share, bulk_size=1000,
                            flush_interval=60, write=write)
        buffer.start()
        for i in range(13):
            buffer.enqueue(Action("create", f"d{i}", {"text": page}))
        await buffer.flush()
        await buffer.stop()

    asyncio.run(run())
    per_bulk = -(-MAX_BULK_BYTES // size_of({"text": page}))
    assert per_bulk == 6 and written == [6, 6, 1]


def test_in_order_batches_go_one_after_another_in_arrival_order() -> None:
    """``window=None`` (es ingest): 150 items in flight, at most 64 a batch; a batch starts only when the one
    before it returned, so each item is judged after every earlier one was decided."""
    batches: list[list[int]] = []
    running: list[int] = []

    async def judge_many(entries: Any) -> Any:
        running.append(len(entries))
        assert len(running) == 1, "two lookup batches at once"
        batches.append([entry[0] for entry in entries])
        await asyncio.sleep(0.01)
        running.pop()
        return [entry[0] for entry in entries]

    async def run() -> list[Any]:
        window = LookupWindow(judge_many, None, 64)
        return await asyncio.gather(*(window.submit((i, {}, None)) for i in range(150)))  # type: ignore[arg-type]

    assert asyncio.run(run()) == list(range(150))
    assert [len(b) for b in batches] == [64, 64, 22]
    assert [i for b in batches for i in b] == list(range(150))
