"""Real Scrapy crawls for tests/integration/test_pipeline.py, run in a fresh interpreter.

    python tests/support/zhcrawl.py CONFIG.json

A Twisted reactor cannot be restarted, so every test run of crawls gets its own process.
CONFIG is ``{"crawls": [crawl, ...], "heartbeat": seconds}``; the crawls run one after the
other in one reactor.  A crawl is ``{"name", "urls", "item", "no_text", "as_str", "settings", "out"}``:

* ``item``: ``dict``, ``item`` (scrapy.Item with the annotation fields), ``bare_item``
  (scrapy.Item without them), ``dataclass`` or ``attrs``;
* ``no_text``: URLs whose item gets no ``html`` field; ``as_str``: send ``response.text``
  instead of the body bytes; ``bad_id``: URLs whose item's url ends in a lone surrogate;
  ``kill_worker_at``: URLs before whose item one of the crawl's worker processes (``ZHDEDUP_WORKERS``)
  is killed with SIGKILL.

Pages are requested one at a time in the given order (each callback requests the next), so
the order of judgements is the order of ``urls``.  Each crawl writes ``out`` as JSON:
``items`` that left the pipelines, ``dropped`` (url, reason), ``errors`` (url, message),
``stats``, the reactor heartbeat ``ticks`` and per-URL ``timing`` [entered, left] the pipelines.
"""

from __future__ import annotations

import dataclasses
import json
import multiprocessing
import os
import signal
import sys
import time
from collections.abc import AsyncIterator, Generator, Iterator
from pathlib import Path
from typing import Any

import attrs
import scrapy
from itemadapter import ItemAdapter
from scrapy import signals
from scrapy.crawler import CrawlerProcess
from twisted.internet import defer, task


class NewsItem(scrapy.Item):
    url = scrapy.Field()
    html = scrapy.Field()
    dedup_status = scrapy.Field()
    dup_of = scrapy.Field()
    dup_distance = scrapy.Field()
    cluster_id = scrapy.Field()


class BareItem(scrapy.Item):
    url = scrapy.Field()
    html = scrapy.Field()


@dataclasses.dataclass
class NewsRecord:
    url: str
    html: bytes | str | None = None
    dedup_status: str | None = None
    dup_of: str | None = None
    dup_distance: int | None = None
    cluster_id: str | None = None


@attrs.define
class NewsAttrs:
    url: str
    html: bytes | str | None = None
    dedup_status: str | None = None
    dup_of: str | None = None
    dup_distance: int | None = None
    cluster_id: str | None = None


def make_item(kind: str, url: str, html: bytes | str | None) -> Any:
    fields = {"url": url} if html is None else {"url": url, "html": html}
    if kind == "dict":
        return fields
    return {"item": NewsItem, "bare_item": BareItem, "dataclass": NewsRecord, "attrs": NewsAttrs}[kind](**fields)


class Recorder:
    """What a crawl did, gathered from pipelines and signals (nothing in the engine is replaced)."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.items: list[dict[str, Any]] = []
        self.dropped: list[dict[str, str]] = []
        self.errors: list[dict[str, str]] = []
        self.timing: dict[str, list[float]] = {}
        self.ticks: list[float] = []

    def entered(self, item: Any) -> None:
        self.timing[ItemAdapter(item)["url"]] = [time.monotonic()]

    def left(self, item: Any) -> None:
        self.timing[ItemAdapter(item)["url"]].append(time.monotonic())


RECORDER = Recorder()


class EnterPipeline:
    def process_item(self, item: Any) -> Any:
        RECORDER.entered(item)
        return item


class CollectPipeline:
    def process_item(self, item: Any) -> Any:
        RECORDER.left(item)
        data = ItemAdapter(item).asdict()
        data.pop("html", None)
        data["type"] = type(item).__name__
        RECORDER.items.append(data)
        return item


class PagesSpider(scrapy.Spider):
    name = "pages"

    def __init__(self, crawl: dict[str, Any], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.crawl = crawl

    async def start(self) -> AsyncIterator[scrapy.Request]:
        yield self._request(0)

    def _request(self, i: int) -> scrapy.Request:
        return scrapy.Request(self.crawl["urls"][i], callback=self.parse, cb_kwargs={"i": i}, dont_filter=True)

    def parse(self, response: scrapy.http.Response, i: int) -> Iterator[Any]:
        html = None if response.url in self.crawl.get("no_text", ()) else (
            response.text if self.crawl.get("as_str") else response.body)
        url = response.url + "\ud800" if response.url in self.crawl.get("bad_id", ()) else response.url
        if response.url in self.crawl.get("kill_worker_at", ()):
            workers = multiprocessing.active_children()
            assert workers, "no worker process to kill"
            os.kill(workers[0].pid or 0, signal.SIGKILL)
            workers[0].join()
        yield make_item(self.crawl["item"], url, html)
        if i + 1 < len(self.crawl["urls"]):
            yield self._request(i + 1)


def _on_dropped(item: Any, exception: Exception, **_: Any) -> None:
    RECORDER.left(item)
    RECORDER.dropped.append({"url": ItemAdapter(item)["url"], "reason": str(exception)})


def _on_error(item: Any, failure: Any, **_: Any) -> None:
    RECORDER.errors.append({"url": ItemAdapter(item)["url"], "message": str(failure.value)})


class Heartbeat:
    """Ticks on the reactor thread while a crawl runs; a blocked reactor stops the ticks."""

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self._call: task.LoopingCall | None = None

    def start(self) -> None:
        # Created here, not earlier: LoopingCall imports the reactor, which the first crawl installs.
        self._call = task.LoopingCall(lambda: RECORDER.ticks.append(time.monotonic()))
        self._call.start(self.interval)

    def stop(self) -> None:
        if self._call is not None and self._call.running:
            self._call.stop()


@defer.inlineCallbacks
def run_all(process: CrawlerProcess, config: dict[str, Any]) -> Generator[defer.Deferred[Any], Any, None]:
    for crawl in config["crawls"]:
        RECORDER.reset()
        heartbeat = Heartbeat(config.get("heartbeat", 0.05))
        spider_cls = type(f"{crawl['name'].title()}Spider", (PagesSpider,), {
            "name": crawl["name"],
            "custom_settings": {
                "ITEM_PIPELINES": {
                    f"{__name__}.EnterPipeline": 100,
                    "scrapy_zhdedup.pipelines.ZhDedupPipeline": 300,
                    f"{__name__}.CollectPipeline": 900,
                },
                **crawl.get("settings", {}),
            },
        })
        crawler = process.create_crawler(spider_cls)
        crawler.signals.connect(_on_dropped, signal=signals.item_dropped)
        crawler.signals.connect(_on_error, signal=signals.item_error)
        crawler.signals.connect(heartbeat.start, signal=signals.spider_opened)
        crawler.signals.connect(heartbeat.stop, signal=signals.spider_closed)
        yield process.crawl(crawler, crawl=crawl)
        result = {"items": RECORDER.items, "dropped": RECORDER.dropped, "errors": RECORDER.errors,
                  "stats": crawler.stats.get_stats(), "ticks": RECORDER.ticks, "timing": RECORDER.timing}
        Path(crawl["out"]).write_text(json.dumps(result, default=str, ensure_ascii=True), encoding="utf-8")


def _stop_reactor() -> None:
    from twisted.internet import reactor  # imported late: the first crawl installs the reactor

    reactor.stop()


def main(config_path: str) -> None:
    config = json.loads(Path(config_path).read_text(encoding="utf-8"))
    process = CrawlerProcess({"LOG_LEVEL": "INFO", "TELNETCONSOLE_ENABLED": False, "REMOTE_CONTROL_ENABLED": False,
                              "ROBOTSTXT_OBEY": False, "DOWNLOAD_TIMEOUT": 60})
    done = run_all(process, config)
    failures: list[Any] = []
    done.addErrback(failures.append)
    done.addBoth(lambda _: _stop_reactor())
    process.start(stop_after_crawl=False)
    if failures:
        failures[0].raiseException()


if __name__ == "__main__":
    main(sys.argv[1])
