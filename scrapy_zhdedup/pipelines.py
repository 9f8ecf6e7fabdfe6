"""The Scrapy item pipeline: ``ITEM_PIPELINES = {"scrapy_zhdedup.pipelines.ZhDedupPipeline": 300}``."""

from __future__ import annotations

import logging
from collections.abc import Callable
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


class DuplicateItem(DropItem):
    """A dropped duplicate: logged in one line at ``ZHDEDUP_DROP_LOG_LEVEL`` (a repeat is routine, like a
    request Scrapy's duplicate filter drops), never with the item, whose page may be megabytes."""

    def __init__(self, message: str, log_level: str) -> None:
        super().__init__(message)
        # log_level is read by Scrapy >= 2.13's LogFormatter.dropped; _one_line_drops reads level on any
        self.level = self.log_level = log_level


class _OneLineDrops:
    """A log formatter's ``dropped`` that logs :class:`DuplicateItem` drops in one line at their level."""

    def __init__(self, dropped: Callable[..., Any]) -> None:
        self.dropped = dropped

    def __call__(self, item: Any, exception: BaseException, response: Any, spider: Any) -> Any:
        result = self.dropped(item, exception, response, spider)
        if isinstance(exception, DuplicateItem):
            result = {**result, "level": logging.getLevelName(exception.level), "msg": "Dropped: %(exception)s",
                      "args": {"exception": exception}}
        return result


def _one_line_drops(crawler: Crawler) -> None:
    """Log :class:`DuplicateItem` drops without the item dump of Scrapy's ``"Dropped: …\\n%(item)s"``
    (every version up to at least 2.19), at its level on any Scrapy, whatever ``LOG_FORMATTER`` is set;
    other drops are logged as before."""
    formatter = getattr(crawler, "logformatter", None)
    if formatter is None or isinstance(formatter.dropped, _OneLineDrops):
        return
    formatter.dropped = _OneLineDrops(formatter.dropped)


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
        config = from_settings(PipelineConfig, settings)
        if not config.enabled:
            raise NotConfigured("ZHDEDUP_ENABLED is off")
        _one_line_drops(crawler)
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
            document = adapter.asdict()
            document.pop(cfg.html_field, None)  # the page is judged, not stored: the backend stores its text
            verdict = await self.backend.judge(str(doc_id), text=text, html=html, document=document)
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
            self.stats.inc_value(f"zhdedup/dropped/{verdict.status}")
            distance = "" if verdict.status == "exact" else f" (distance {verdict.distance})"
            raise DuplicateItem(f"zhdedup: {doc_id}: {verdict.status} duplicate of {verdict.dup_of}{distance}",
                                cfg.drop_log_level)
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
