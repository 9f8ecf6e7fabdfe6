"""The same crawl as ``news``, run by several processes fed from one scrapy-redis queue.

Start any number of ``scrapy crawl news_redis`` processes (on one machine or many, all pointed at the
same redis with ``REDIS_URL``), then push the portal page to ``news_redis:start_urls``; the requests
every process finds go to one shared queue and one shared request dupefilter in redis, so each page is
fetched once, by whichever process pops it.  A process closes after ``MAX_IDLE_TIME_BEFORE_CLOSE``
seconds with nothing to do.  ``examples/run_distributed.py`` runs it end to end; the README's "Several
crawlers on one index" gives the commands.
"""

from __future__ import annotations

import time
from typing import Any

from scrapy.http import Response
from scrapy_redis.spiders import RedisSpider

from zhnews.spiders.news import NewsPages

# What makes a crawl distributed, as scrapy-redis documents it; given to this spider only, so ``news``
# keeps Scrapy's own scheduler.  SCHEDULER_PERSIST: the first process to finish must not clear the
# queue and dupefilter the others still use (the seeder clears them before a new crawl).  The redis
# server is REDIS_URL (settings.py: from the environment).
REDIS_SETTINGS: dict[str, Any] = {
    "SCHEDULER": "scrapy_redis.scheduler.Scheduler",
    "DUPEFILTER_CLASS": "scrapy_redis.dupefilter.RFPDupeFilter",
    "SCHEDULER_PERSIST": True,
    "MAX_IDLE_TIME_BEFORE_CLOSE": 5,
}


class NewsRedisSpider(NewsPages, RedisSpider):
    name = "news_redis"
    custom_settings = REDIS_SETTINGS

    def start_requests(self) -> Any:
        """scrapy-redis counts idle time from when its class was imported: count it from the start."""
        self.spider_idle_start_time = int(time.time())
        return super().start_requests()

    def parse(self, response: Response, **kwargs: Any) -> Any:
        """A seeded URL is the portal page, where ``news`` starts."""
        return self.parse_index(response)
