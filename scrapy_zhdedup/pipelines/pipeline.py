"""The Scrapy item pipeline: ``ITEM_PIPELINES = {"scrapy_zhdedup.pipelines.ZhDedupPipeline": 300}``.

Failing once and early beats failing per item: the backend is built (settings, the backend's
module, the embedded store) in ``from_crawler`` and opened (store reachable, index fitting,
dead-letter file writable) in ``open_spider``.  Any of that failing is said in one ERROR line when
the spider opens, which then closes before anything is downloaded (``finish_reason``
``zhdedup_cannot_start``): raising instead made Scrapy print ~65 lines of tracebacks (its
CoreStats' assertion, asyncio's "Task exception was never retrieved").  In annotate mode an item
class that cannot take the annotation fields is refused at its first item, before it is judged (a
judged item is remembered, and the next run would drop it as a repeat of itself); the spider is
then closed.  While the store is away (Elasticsearch restarting) the backend holds each item's judgement,
so ``process_item`` waits and Scrapy stops fetching once its scraper is full: the crawl slows, nothing is
dropped.  An item the backend still cannot judge past ``ZHDEDUP_ES_OUTAGE_TIMEOUT`` is kept with its fields
in the backend's dead-letter file (``zhdedup/dead_letter``) and dropped here (``zhdedup/not_delivered``)
without being marked delivered in the ledger: the replay the close log prints delivers it, and a re-crawl
never takes it for one an earlier run delivered.  If the store can take nothing more (the embedded store's disk is full, the
dead-letter file cannot be written), the spider is closed (``zhdedup_store_failed``) and the items
still coming pass on unjudged (``zhdedup/skipped/store_failed``): a repeat may get through, but no
item is lost.
While the spider crawls, the garbage collector leaves alone what existed when it opened (garbage_collector.py).

Reruns (``ZHDEDUP_RERUN``): an item judged by an earlier run with the same id and text gets that
run's verdict back from either backend.  ``new`` (the default) drops it when an earlier run delivered
it, so an incremental crawl passes on only what is new; the delivery ledger (delivery.py) tells the
items a killed run judged but never delivered, and those are delivered.  ``all`` passes every such
item again, as its verdict says.  Stats: ``zhdedup/rerun/delivered`` (delivered by an earlier run),
``zhdedup/rerun/undelivered`` (judged, never delivered: delivered now), ``zhdedup/dropped/rerun``;
only items that would pass are counted, which both backends know alike (Elasticsearch keeps no
duplicate dropped in drop mode, so it cannot tell one judged before from a new one).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from itemadapter import ItemAdapter
from scrapy import Spider, signals
from scrapy.crawler import Crawler
from scrapy.exceptions import CloseSpider, DropItem, NotConfigured
from scrapy.utils.defer import deferred_from_coro

from ..config import PipelineConfig, from_settings
from ..errors import EmptyTextError, InvalidDocumentError, StoreFailedError, StoreUnavailableError, ZhDedupError
from ..explain import drop_reason
from ..garbage_collector import COLLECTOR
from ..model import Verdict
from .backends import Backend, load_backend
from .delivery import DeliveryLedger

logger = logging.getLogger(__name__)


def _printable(doc_id: Any) -> str:
    """An id as the log can print it (a lone surrogate too)."""
    return str(doc_id).encode("utf-8", "backslashreplace").decode("utf-8")


class DuplicateItem(DropItem):
    """A dropped duplicate: logged in one line at ``ZHDEDUP_DROP_LOG_LEVEL`` (a repeat is routine, like a
    request Scrapy's duplicate filter drops), never with the item, whose page may be megabytes.  An item
    held back unjudged is dropped the same way, at WARNING."""

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

    def __init__(self, crawler: Crawler, config: PipelineConfig, backend: Backend | None,
                 problem: ZhDedupError | None = None) -> None:
        """``problem``: why the backend could not be built; said, and the spider closed, at open."""
        self.crawler = crawler
        self.config = config
        self.backend = backend
        self.problem = problem
        self.stats = crawler.stats
        self.ledger: DeliveryLedger | None = None
        self._frozen = False  # holds the collector's freeze while the spider crawls (garbage_collector.py)
        self._held_back: set[str] = set()  # ids not judged and not delivered: kept by the backend for later
        self._annotatable: dict[type, str | None] = {}  # item class -> why it cannot be annotated (None: it can)
        for signal in (signals.item_scraped, signals.item_dropped):
            crawler.signals.connect(self._finished, signal=signal)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ZhDedupPipeline:
        """A setting that cannot be used (a URL the client cannot parse, say) is one line first, then the
        crawl fails as at :meth:`open_spider`."""
        settings = crawler.settings
        try:
            config = from_settings(PipelineConfig, settings)
            if not config.enabled:
                raise NotConfigured("ZHDEDUP_ENABLED is off")
            _one_line_drops(crawler)
            return cls(crawler, config, load_backend(crawler, config.backend))
        except ZhDedupError as exc:  # a setting, the [es] extra missing, a locked store: one line at open
            _one_line_drops(crawler)
            return cls(crawler, PipelineConfig(), None, exc)

    async def open_spider(self, spider: Spider | None = None) -> None:
        try:
            if self.problem is not None:
                raise self.problem
            assert self.backend is not None  # built, or the problem says why not
            await self.backend.open()
            self.ledger = self._open_ledger()
        except ZhDedupError as exc:
            logger.error("zhdedup: cannot start, the crawl stops: %s", exc)
            self.stats.set_value("zhdedup/error", str(exc))
            raise CloseSpider("zhdedup_cannot_start") from None
        self._frozen = COLLECTOR.hold()
        described = self.backend.describe()
        rerun = ("an item an earlier run delivered is dropped" if self.config.rerun == "new"
                 else "an item an earlier run judged passes again")
        undelivered = len(self.ledger.undelivered) if self.ledger else 0
        logger.info("zhdedup: %s; ZHDEDUP_RERUN = %r: %s%s", described, self.config.rerun, rerun,
                    f"; {undelivered} items judged by an earlier run and never delivered are delivered when crawled "
                    "again" if undelivered else "")

    def _open_ledger(self) -> DeliveryLedger | None:
        """The ledger beside the backend's state (none for a store kept in memory only)."""
        assert self.backend is not None
        where = self.backend.local_state()
        if where is None:
            return None
        ledger = DeliveryLedger(*where)
        ledger.open()
        return ledger

    def _finished(self, item: Any) -> None:
        """Scrapy is done with ``item`` (``item_scraped``, ``item_dropped``): it is delivered."""
        doc_id = ItemAdapter(item).get(self.config.id_field)
        if doc_id is None:
            return
        if str(doc_id) in self._held_back:  # dropped, but not delivered: it stays in the ledger
            self._held_back.discard(str(doc_id))
        elif self.ledger is not None:
            self.ledger.done(str(doc_id))

    async def process_item(self, item: Any, spider: Spider | None = None) -> Any:
        adapter = ItemAdapter(item)
        cfg = self.config
        if cfg.mode == "annotate" and (problem := self._annotation_problem(type(item))):
            raise DropItem(f"zhdedup: not judged, {type(item).__name__} cannot take the annotations ({problem})")
        doc_id = adapter.get(cfg.id_field)
        text, html = adapter.get(cfg.text_field), adapter.get(cfg.html_field)
        if doc_id is None or (text is None and html is None):
            self.stats.inc_value("zhdedup/skipped/missing_fields")
            logger.warning("zhdedup: item without %r or %r/%r passed through unjudged: %.200r",
                           cfg.id_field, cfg.text_field, cfg.html_field, item)
            return item
        verdict = await self._judge(adapter, str(doc_id), text, html)
        if verdict is None:
            return item
        self.stats.inc_value("zhdedup/judged")
        self.stats.inc_value(f"zhdedup/{verdict.status}")
        if verdict.is_duplicate and cfg.mode == "drop":
            self.stats.inc_value(f"zhdedup/dropped/{verdict.status}")
            raise DuplicateItem(f"zhdedup: {drop_reason(doc_id, verdict)}", cfg.drop_log_level)
        self._rerun(str(doc_id), verdict)
        if cfg.mode == "annotate":
            self._annotate(adapter, verdict)
        return item

    async def _judge(self, adapter: ItemAdapter, doc_id: str, text: Any, html: Any) -> Verdict | None:
        """The backend's verdict, or None for an item that passes unjudged (raises DropItem for one the
        store will judge later)."""
        assert self.backend is not None
        try:
            if self.ledger is not None:
                self.ledger.note(doc_id)  # before the store records a verdict: see delivery.py
            document = {}
            if self.backend.stores_documents:
                document = adapter.asdict()
                document.pop(self.config.html_field, None)  # the page is judged, not stored: the backend stores its text
            return await self.backend.judge(doc_id, text=text, html=html, document=document)
        except (EmptyTextError, InvalidDocumentError) as exc:
            self.stats.inc_value(f"zhdedup/skipped/{exc.skipped_as}")  # empty_text, junk, invalid
            logger.warning("zhdedup: %s passed through unjudged: %s", _printable(doc_id), exc)
            return None
        except StoreUnavailableError as exc:  # kept by the backend (dead-letter file), delivered by its replay
            self._held_back.add(doc_id)
            self.stats.inc_value("zhdedup/not_delivered")
            raise DuplicateItem(f"zhdedup: {_printable(doc_id)}: not delivered now: {exc} (the line at close says "
                                f"how to deliver it)", "WARNING") from exc
        except StoreFailedError as exc:  # nothing can be remembered any more: stop once, loudly, keep the item
            self._close("zhdedup_store_failed", f"zhdedup: {exc}")
            self.stats.inc_value("zhdedup/skipped/store_failed")
            logger.warning("zhdedup: %s passed through unjudged: the store failed (see the error above)",
                           _printable(doc_id))
            return None

    def _rerun(self, doc_id: str, verdict: Verdict) -> None:
        """An item that would pass, judged by an earlier run with the same text: counted, and dropped with
        ``ZHDEDUP_RERUN = "new"`` unless that run never delivered it."""
        if verdict.rerun != "same":
            return
        if self.ledger is not None and doc_id in self.ledger.undelivered:
            self.stats.inc_value("zhdedup/rerun/undelivered")
            return
        self.stats.inc_value("zhdedup/rerun/delivered")
        if self.config.rerun == "new":
            self.stats.inc_value("zhdedup/dropped/rerun")
            raise DuplicateItem(f"zhdedup: {doc_id}: delivered by an earlier run (same text; ZHDEDUP_RERUN = "
                                f"'all' passes it again)", self.config.drop_log_level)

    def _annotation_problem(self, item_class: type) -> str | None:
        """Why items of this class cannot take the annotation fields; the first time, the spider is closed."""
        if item_class in self._annotatable:
            return self._annotatable[item_class]
        declared = ItemAdapter.get_field_names_from_class(item_class)  # None: any key can be set (dict)
        missing = [f for f in self.config.fields.values() if declared is not None and f not in declared]
        problem = None
        if missing:
            problem = (f"zhdedup cannot set {missing[0]!r} on {item_class.__name__}: declare the field, or "
                       f"rename/remove it in ZHDEDUP_FIELDS (ZHDEDUP_MODE = 'annotate'; missing: {missing})")
            self._close("zhdedup_cannot_annotate", f"{problem}; no item was judged")
        self._annotatable[item_class] = problem
        return problem and "see the error above"

    def _close(self, reason: str, message: str) -> None:
        """Close the spider with ``reason``, once; ``message`` goes to the log and the ``zhdedup/error`` stat."""
        if self.stats.get_value("zhdedup/error") is not None:
            return
        logger.error("%s; closing the spider", message)
        self.stats.set_value("zhdedup/error", message)
        assert self.crawler.engine is not None
        deferred_from_coro(self.crawler.engine.close_spider_async(reason=reason))

    def _annotate(self, adapter: ItemAdapter, verdict: Verdict) -> None:
        values = {"status": verdict.status, "dup_of": verdict.dup_of, "distance": verdict.distance,
                  "cluster": verdict.cluster, "similarity": verdict.similarity, "contained": verdict.contained,
                  "reason": verdict.reason}
        for key, field in self.config.fields.items():
            adapter[field] = values[key]  # the class was checked before judging

    async def close_spider(self, spider: Spider | None = None) -> None:
        if self._frozen:
            self._frozen = False
            COLLECTOR.release()
        if self.ledger is not None:
            self.ledger.close()
        if self.backend is None:
            return
        try:
            await self.backend.close()
        except StoreFailedError as exc:  # said in one line: a traceback would add nothing to it
            logger.error("zhdedup: %s", exc)
            if self.stats.get_value("zhdedup/error") is None:
                self.stats.set_value("zhdedup/error", str(exc))
