"""The Scrapy item pipeline: ``ITEM_PIPELINES = {"scrapy_zhdedup.pipelines.ZhDedupPipeline": 300}``."""

from __future__ import annotations

import logging
from typing import Any

from itemadapter import ItemAdapter
from scrapy import Spider
from scrapy.crawler import Crawler
from scrapy.exceptions import DropItem, NotConfigured

from .backends import Backend, load_backend
from .config import DedupConfig, PipelineConfig, from_settings
from .errors import EmptyTextError, InvalidDocumentError
from .judge import Verdict

logger = logging.getLogger(__name__)


class ZhDedupPipeline:
    """Drops (or annotates) items whose text repeats an earlier item exactly or nearly."""

    def __init__(self, crawler: Crawler, config: PipelineConfig, dedup: DedupConfig, backend: Backend) -> None:
        self.crawler = crawler
        self.config = config
        self.dedup = dedup
        self.backend = backend
        self.stats = crawler.stats

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ZhDedupPipeline:
        settings = crawler.settings
        if not settings.getbool("ZHDEDUP_ENABLED", True):
            raise NotConfigured("ZHDEDUP_ENABLED is off")
        config = from_settings(PipelineConfig, settings)
        return cls(crawler, config, from_settings(DedupConfig, settings), load_backend(crawler, config.backend))

    async def process_item(self, item: Any, spider: Spider | None = None) -> Any:
        adapter = ItemAdapter(item)
        cfg = self.config
        doc_id = adapter.get(cfg.id_field)
        text, html = adapter.get(cfg.text_field), adapter.get(cfg.html_field)
        if doc_id is None or (text is None and html is None):
            self.stats.inc_value("zhdedup/skipped/missing_fields")
            logger.warning("zhdedup: item without %r or %r/%r passed through unjudged: %.200r",
                           cfg.id_field, cfg.text_field, cfg.html_field, item)
            return item
        try:
            verdict = await self.backend.judge(str(doc_id), text=text, html=html, document=adapter.asdict())
        except (EmptyTextError, InvalidDocumentError) as exc:
            reason = "empty_text" if isinstance(exc, EmptyTextError) else "invalid"
            self.stats.inc_value(f"zhdedup/skipped/{reason}")
            printable = str(doc_id).encode("utf-8", "backslashreplace").decode("utf-8")  # a lone surrogate too
            logger.warning("zhdedup: %s passed through unjudged: %s", printable, exc)
            return item
        self.stats.inc_value("zhdedup/judged")
        self.stats.inc_value(f"zhdedup/{verdict.status}")
        if verdict.rerun:
            self.stats.inc_value(f"zhdedup/rerun/{verdict.rerun}")
        if verdict.is_duplicate and cfg.mode == "drop":
            raise DropItem(f"zhdedup: {verdict.status} duplicate of {verdict.dup_of} (distance {verdict.distance})")
        if cfg.mode == "annotate":
            self._annotate(adapter, verdict)
        return item

    def _annotate(self, adapter: ItemAdapter, verdict: Verdict) -> None:
        values = {"status": verdict.status, "dup_of": verdict.dup_of, "distance": verdict.distance,
                  "cluster": verdict.cluster}
        for key, field in self.config.fields.items():
            try:
                adapter[field] = values[key]
            except KeyError as exc:
                raise KeyError(
                    f"zhdedup cannot set {field!r} on {type(adapter.item).__name__}: declare the field, "
                    f"or rename/remove it in ZHDEDUP_FIELDS"
                ) from exc

    async def close_spider(self, spider: Spider | None = None) -> None:
        await self.backend.close()
