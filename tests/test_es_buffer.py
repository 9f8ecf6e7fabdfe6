"""The backend's bulk buffer (buffer.py): when a batch is handed to the writer.  No node needed."""

from __future__ import annotations

import asyncio

from es_plugin.buffer import MAX_BULK_BYTES, BulkBuffer, PendingBatch, size_of
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
