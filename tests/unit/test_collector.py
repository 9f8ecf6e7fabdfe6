"""The garbage collector while spiders crawl (pipelines/collector.py, issue 40): what exists at open is frozen and
young collections are rarer until the last spider closes; a process that manages the collector itself is left
as it is."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator

import pytest
from scrapy.utils.test import get_crawler

from scrapy_zhdedup.pipelines import ZhDedupPipeline
from scrapy_zhdedup.pipelines.collector import FREEZER, YOUNG_COLLECTION, _Freezer


@pytest.fixture(autouse=True)
def _collector_as_in_a_fresh_process() -> Iterator[None]:
    threshold, enabled = gc.get_threshold(), gc.isenabled()
    gc.unfreeze()  # another test's worker pool may have frozen this process's objects
    gc.enable()
    gc.set_threshold(700, *threshold[1:])
    yield
    gc.unfreeze()
    gc.set_threshold(*threshold)
    if not enabled:
        gc.disable()


def test_the_pipeline_holds_the_freeze_from_open_to_close() -> None:
    pipeline = ZhDedupPipeline.from_crawler(get_crawler(settings_dict={"ZHDEDUP_BACKEND": "tests.support.backends.JudgeOnly"}))

    async def crawl() -> tuple[int, int]:
        await pipeline.open_spider()
        during = gc.get_freeze_count(), gc.get_threshold()[0]
        await pipeline.close_spider()
        return during

    frozen, young = asyncio.run(crawl())
    assert frozen > 0 and young == YOUNG_COLLECTION
    assert gc.get_freeze_count() == 0 and gc.get_threshold()[0] == 700 and FREEZER.holders == 0


def test_the_last_of_several_spiders_to_close_thaws() -> None:
    freezer = _Freezer()
    assert freezer.hold() and freezer.hold()
    frozen = gc.get_freeze_count()
    freezer.release()
    assert gc.get_freeze_count() == frozen and gc.get_threshold()[0] == YOUNG_COLLECTION  # one still crawls
    freezer.release()
    assert gc.get_freeze_count() == 0 and gc.get_threshold()[0] == 700


def test_a_process_that_manages_the_collector_itself_is_left_as_it_is() -> None:
    freezer = _Freezer()
    gc.freeze()
    frozen = gc.get_freeze_count()
    assert not freezer.hold() and gc.get_freeze_count() == frozen and gc.get_threshold()[0] == 700
    gc.unfreeze()
    gc.disable()
    assert not freezer.hold() and gc.get_freeze_count() == 0 and not gc.isenabled()
