"""The garbage collector during a run (garbage_collector.py, issue 40): what exists when a spider opens, or
``es ingest`` starts, is frozen and young collections are rarer until the last run ends; a process that manages
the collector itself is left as it is, a worker pool's own freeze is not taken for that."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator

import pytest
from scrapy.utils.test import get_crawler

from scrapy_zhdedup.garbage_collector import COLLECTOR, YOUNG_COLLECTION, Collector
from scrapy_zhdedup.pipelines import ZhDedupPipeline


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
    assert gc.get_freeze_count() == 0 and gc.get_threshold()[0] == 700 and COLLECTOR.holders == 0


def test_the_last_of_several_spiders_to_close_thaws() -> None:
    freezer = Collector()
    assert freezer.hold() and freezer.hold()
    frozen = gc.get_freeze_count()
    freezer.release()
    assert gc.get_freeze_count() == frozen and gc.get_threshold()[0] == YOUNG_COLLECTION  # one still crawls
    freezer.release()
    assert gc.get_freeze_count() == 0 and gc.get_threshold()[0] == 700


def test_a_process_that_manages_the_collector_itself_is_left_as_it_is() -> None:
    freezer = Collector()
    gc.freeze()
    frozen = gc.get_freeze_count()
    assert not freezer.hold() and gc.get_freeze_count() == frozen and gc.get_threshold()[0] == 700
    gc.unfreeze()
    gc.disable()
    assert not freezer.hold() and gc.get_freeze_count() == 0 and not gc.isenabled()


def test_a_pool_frozen_before_its_fork_does_not_keep_the_run_from_holding() -> None:
    collector = Collector()
    collector.freeze()  # as PreparePool before it forks
    with collector.holding():
        assert gc.get_threshold()[0] == YOUNG_COLLECTION
    assert gc.get_freeze_count() == 0 and gc.get_threshold()[0] == 700 and collector.holders == 0
    collector.freeze()
    kept = [[] for _ in range(100)]
    gc.freeze()  # the caller's own, after the pool's
    assert kept and gc.get_freeze_count() > 0
    with collector.holding():
        assert gc.get_threshold()[0] == 700
