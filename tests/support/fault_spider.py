"""A spider for ``scrapy runspider`` in the fault tests: a real ``scrapy`` process, its real exit status.

    scrapy runspider tests/support/fault_spider.py -a urls=URLS.txt -a out=RESULT.json [-a item=dict|bare]
        [-a delivered=DELIVERED.txt] [-a kill_at=URL] -s ...

Pages are requested one at a time in the order of URLS.txt (one URL a line), so items reach the
pipeline in that order.  ``item=bare`` yields a ``scrapy.Item`` without the annotation fields.
At close, RESULT.json gets the finish reason, the stats and the URLs of the items that left the
pipelines (in the order they left).  ``delivered``: each item's URL is appended to that file as it is
scraped (what a killed crawl delivered).  ``kill_at``: the process SIGKILLs itself when that URL's item
reaches the pipeline after scrapy-zhdedup's: judged, never delivered.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import scrapy
from itemadapter import ItemAdapter
from scrapy import signals
from scrapy.crawler import Crawler


class BareItem(scrapy.Item):
    url = scrapy.Field()
    html = scrapy.Field()


class KillPipeline:
    """After scrapy-zhdedup's: a crawl killed between judging an item and delivering it."""

    def process_item(self, item: Any, spider: FaultSpider) -> Any:
        if spider.kill_at and ItemAdapter(item)["url"] == spider.kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        return item


class FaultSpider(scrapy.Spider):
    name = "fault"
    custom_settings = {  # noqa: RUF012 - Scrapy reads it from the class
        "ITEM_PIPELINES": {"scrapy_zhdedup.pipelines.ZhDedupPipeline": 300, KillPipeline: 400},
        "ROBOTSTXT_OBEY": False,
        "TELNETCONSOLE_ENABLED": False,
        "LOG_LEVEL": "INFO",
    }

    def __init__(self, urls: str, out: str, item: str = "dict", delivered: str = "", kill_at: str = "",
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.delivered = Path(delivered) if delivered else None
        self.kill_at = kill_at
        self.urls = Path(urls).read_text(encoding="utf-8").split()
        self.out = Path(out)
        self.item_kind = item
        self.scraped: list[str] = []

    @classmethod
    def from_crawler(cls, crawler: Crawler, *args: Any, **kwargs: Any) -> FaultSpider:
        spider = super().from_crawler(crawler, *args, **kwargs)
        crawler.signals.connect(spider._scraped, signal=signals.item_scraped)
        crawler.signals.connect(spider._closed, signal=signals.spider_closed)
        return spider

    async def start(self) -> AsyncIterator[scrapy.Request]:
        if self.urls:
            yield self._request(0)

    def _request(self, i: int) -> scrapy.Request:
        return scrapy.Request(self.urls[i], callback=self.parse, cb_kwargs={"i": i}, dont_filter=True)

    def parse(self, response: scrapy.http.Response, i: int) -> Iterator[Any]:
        fields = {"url": response.url, "html": response.body}
        yield BareItem(**fields) if self.item_kind == "bare" else fields
        if i + 1 < len(self.urls):
            yield self._request(i + 1)

    def _scraped(self, item: Any) -> None:
        self.scraped.append(ItemAdapter(item)["url"])
        if self.delivered is not None:
            with self.delivered.open("a", encoding="utf-8") as fh:
                fh.write(ItemAdapter(item)["url"] + "\n")

    def _closed(self, reason: str) -> None:
        assert self.crawler.stats is not None
        result = {"reason": reason, "stats": self.crawler.stats.get_stats(), "scraped": self.scraped}
        self.out.write_text(json.dumps(result, default=str, ensure_ascii=False), encoding="utf-8")
