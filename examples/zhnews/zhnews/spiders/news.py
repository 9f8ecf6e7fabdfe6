"""Crawl the example news site: the index, each site's list page, every article page listed there."""

from __future__ import annotations

import os
import re
from collections.abc import AsyncIterator, Iterator
from urllib.parse import urlsplit

import scrapy
from scrapy.http import Response

from zhnews.items import NewsItem

ARTICLE_PATH = re.compile(r"^/[a-z]+/(news|print|big5)/\d+\.html$")
LIST_PATH = re.compile(r"^/[a-z]+/index\.html$")


class NewsPages:
    """How the site's pages are read: shared by ``news`` and ``news_redis`` (spiders/news_redis.py)."""

    def parse_index(self, response: Response) -> Iterator[scrapy.Request]:
        """The portal page links one list page per site."""
        for href in response.css("a::attr(href)").getall():
            if LIST_PATH.match(urlsplit(response.urljoin(href)).path):
                yield response.follow(href, callback=self.parse_list)

    def parse_list(self, response: Response) -> Iterator[scrapy.Request]:
        """A site's list page links every page it publishes (articles, print and Big5 versions)."""
        for href in response.css("ul.list a::attr(href)").getall():
            if ARTICLE_PATH.match(urlsplit(response.urljoin(href)).path):
                yield response.follow(href, callback=self.parse_article)

    def parse_article(self, response: Response) -> Iterator[NewsItem]:
        title = response.css("h1::text").get() or response.css("title::text").get() or ""
        yield NewsItem(
            url=response.url,
            title=title.strip(),
            site=urlsplit(response.url).path.strip("/").split("/")[0],
            html=response.text,  # decoded by Scrapy from the header, <meta> charset or the bytes
        )


class NewsSpider(NewsPages, scrapy.Spider):
    name = "news"

    def __init__(self, start_url: str | None = None, **kwargs: object) -> None:
        super().__init__(**kwargs)
        self.start_url = start_url or os.environ.get("ZHNEWS_START_URL", "http://127.0.0.1:8765/")

    async def start(self) -> AsyncIterator[scrapy.Request]:
        yield scrapy.Request(self.start_url, callback=self.parse_index)
