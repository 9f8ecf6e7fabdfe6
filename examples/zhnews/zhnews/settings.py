"""Settings of the example crawl, with every scrapy-zhdedup setting spelt out at its default.

Each ``ZHDEDUP_*`` value can be overridden by an environment variable of the same name
(``ZHDEDUP_BACKEND=elasticsearch ZHDEDUP_ES_URL=http://127.0.0.1:9200 scrapy crawl news``) or
on the command line (``-s ZHDEDUP_THRESHOLD=4``, which wins over both).  Values from the
environment are strings; scrapy-zhdedup converts them ("true"/"false", numbers, JSON for
``ZHDEDUP_FIELDS``) and names the setting in the error if one does not parse.
"""

from __future__ import annotations

import os
from typing import Any


def _env(name: str, default: Any) -> Any:
    return os.environ.get(name, default)


BOT_NAME = "zhnews"
SPIDER_MODULES = ["zhnews.spiders"]
NEWSPIDER_MODULE = "zhnews.spiders"

ROBOTSTXT_OBEY = False  # the example site is ours and has no robots.txt
TELNETCONSOLE_ENABLED = False
FEED_EXPORT_ENCODING = "utf-8"
# The Elasticsearch backend runs on asyncio; this reactor is Scrapy's default since 2.13 and
# harmless for the embedded backend.
TWISTED_REACTOR = "twisted.internet.asyncioreactor.AsyncioSelectorReactor"

ITEM_PIPELINES = {"scrapy_zhdedup.pipelines.ZhDedupPipeline": 300}
# The shared queue of ``scrapy crawl news_redis`` (several processes, one scrapy-redis queue).
REDIS_URL = _env("REDIS_URL", "redis://127.0.0.1:6379/0")

# --- scrapy-zhdedup: the pipeline (PipelineConfig) -------------------------------------------
ZHDEDUP_ENABLED = _env("ZHDEDUP_ENABLED", True)  # False: the pipeline is not loaded at all
ZHDEDUP_BACKEND = _env("ZHDEDUP_BACKEND", "embedded")  # "embedded" (in-process store) | "elasticsearch"
# Default "drop" (DropItem for duplicates); the example keeps them and annotates, to report clusters.
ZHDEDUP_MODE = _env("ZHDEDUP_MODE", "annotate")
ZHDEDUP_DROP_LOG_LEVEL = _env("ZHDEDUP_DROP_LOG_LEVEL", "DEBUG")  # one line per dropped duplicate, at this level
ZHDEDUP_ID_FIELD = _env("ZHDEDUP_ID_FIELD", "url")  # item field naming the document
ZHDEDUP_TEXT_FIELD = _env("ZHDEDUP_TEXT_FIELD", "text")  # item field with plain text (if no html)
ZHDEDUP_HTML_FIELD = _env("ZHDEDUP_HTML_FIELD", "html")  # item field with the page; wins over text
ZHDEDUP_FIELDS = _env("ZHDEDUP_FIELDS", {  # annotation -> item field; leave a key out to skip it
    "status": "dedup_status", "dup_of": "dup_of", "distance": "dup_distance", "cluster": "cluster_id",
    "similarity": "dup_similarity",  # not in the default: what decided a near repeat
})
ZHDEDUP_STORE_DIR = _env("ZHDEDUP_STORE_DIR", "")  # embedded store on disk; "" = JOBDIR/zhdedup, or memory only
ZHDEDUP_WORKERS = _env("ZHDEDUP_WORKERS", 1)  # processes that clean and fingerprint; 1 = a thread of this one
ZHDEDUP_RERUN = _env("ZHDEDUP_RERUN", "new")  # a page an earlier run delivered: "new" drops it, "all" passes it

# --- scrapy-zhdedup: cleaning and fingerprinting (DedupConfig) -------------------------------
ZHDEDUP_THRESHOLD = _env("ZHDEDUP_THRESHOLD", 3)  # SimHash distance (of 64 bits) the band keys reach
ZHDEDUP_BANDS = _env("ZHDEDUP_BANDS", 0)  # blocks the fingerprint is cut into; 0 = threshold + 2
ZHDEDUP_FEATURES = _env("ZHDEDUP_FEATURES", "sketch")  # "sketch" (its 4-gram hashes) | "auto" | "words" (jieba, IDF) | "chars"
ZHDEDUP_SHORT_TEXT_CHARS = _env("ZHDEDUP_SHORT_TEXT_CHARS", 200)  # "auto" uses chars below this length
ZHDEDUP_SHINGLE_SIZE = _env("ZHDEDUP_SHINGLE_SIZE", 3)  # character n-gram size for "chars"
ZHDEDUP_TRADITIONAL_TO_SIMPLIFIED = _env("ZHDEDUP_TRADITIONAL_TO_SIMPLIFIED", True)  # OpenCC t2s first
ZHDEDUP_EXTRACTOR = _env("ZHDEDUP_EXTRACTOR", "lxml")  # main-text extraction: "lxml" (fast) | "trafilatura"
ZHDEDUP_MAX_CHARS = _env("ZHDEDUP_MAX_CHARS", 200_000)  # longer texts are cut before fingerprinting
ZHDEDUP_PASSAGES = _env("ZHDEDUP_PASSAGES", False)  # also find candidates through shared passages
ZHDEDUP_PASSAGE_CHARS = _env("ZHDEDUP_PASSAGE_CHARS", 20)  # minimum length of a hashed sentence run
ZHDEDUP_SIMHASH_BANDS = _env("ZHDEDUP_SIMHASH_BANDS", False)  # also find candidates through SimHash band keys
ZHDEDUP_PASSAGE_SHARE = _env("ZHDEDUP_PASSAGE_SHARE", 0.2)  # share of passages an earlier text must hold
ZHDEDUP_SIMILARITY = _env("ZHDEDUP_SIMILARITY", 0.68)  # estimated 4-gram Jaccard of a near repeat
ZHDEDUP_CONTAINMENT = _env("ZHDEDUP_CONTAINMENT", 0.85)  # or: share of the new text inside an earlier one
ZHDEDUP_BLOOM_ERROR_RATE = _env("ZHDEDUP_BLOOM_ERROR_RATE", 0.001)  # exact-repeat Bloom filter error rate
ZHDEDUP_BLOOM_CAPACITY = _env("ZHDEDUP_BLOOM_CAPACITY", 100_000)  # its initial capacity; it grows past it

# --- scrapy-zhdedup: Elasticsearch (EsConfig), used when ZHDEDUP_BACKEND = "elasticsearch" -----
ZHDEDUP_ES_URL = _env("ZHDEDUP_ES_URL", "http://127.0.0.1:9200")
ZHDEDUP_ES_INDEX = _env("ZHDEDUP_ES_INDEX", "zhdedup-docs")  # index (and template zhdedup-<index>)
ZHDEDUP_ES_USER = _env("ZHDEDUP_ES_USER", "")  # basic auth user
ZHDEDUP_ES_PASSWORD = _env("ZHDEDUP_ES_PASSWORD", "")  # basic auth password
ZHDEDUP_ES_API_KEY = _env("ZHDEDUP_ES_API_KEY", "")  # API key instead of user/password
ZHDEDUP_ES_CA_CERTS = _env("ZHDEDUP_ES_CA_CERTS", "")  # CA bundle for https
ZHDEDUP_ES_TIMEOUT = _env("ZHDEDUP_ES_TIMEOUT", 10.0)  # seconds per request
ZHDEDUP_ES_BULK_SIZE = _env("ZHDEDUP_ES_BULK_SIZE", 1000)  # documents per bulk request
ZHDEDUP_ES_FLUSH_INTERVAL = _env("ZHDEDUP_ES_FLUSH_INTERVAL", 5.0)  # seconds between flushes of a partial bulk
ZHDEDUP_ES_BATCH_WINDOW = _env("ZHDEDUP_ES_BATCH_WINDOW", 0.05)  # longest an item waits to be looked up with others
ZHDEDUP_ES_MAX_RETRIES = _env("ZHDEDUP_ES_MAX_RETRIES", 5)  # retries with backoff before dead-lettering
ZHDEDUP_ES_OUTAGE_TIMEOUT = _env("ZHDEDUP_ES_OUTAGE_TIMEOUT", 300.0)  # seconds items wait while the node is away
ZHDEDUP_ES_TEXT_FIELD = _env("ZHDEDUP_ES_TEXT_FIELD", "text")  # field the cleaned text is stored in
ZHDEDUP_ES_ANALYSIS = _env("ZHDEDUP_ES_ANALYSIS", "jieba")  # "jieba" (any cluster) | "smartcn" | "ik" (plugins)
ZHDEDUP_ES_DEAD_LETTER = _env("ZHDEDUP_ES_DEAD_LETTER", "")  # not judged / not stored; "" = in JOBDIR or ./
