"""``zhdedup es dedup-index``: fingerprint and cluster a corpus that is already in Elasticsearch.

Read order, and why it survives interruption:

* Documents are read through a point in time sorted on ``[_seq_no, _shard_doc]``.  ``_id`` cannot
  be sorted on (no fielddata on ``_id`` since 8.x) and ``_shard_doc`` alone is Lucene's doc id,
  which merges renumber, so it means nothing in another point in time.  ``_seq_no`` is unique per
  shard and never changes while a document is not written to; ``_shard_doc`` only breaks ties
  between shards, by its shard number (its high bits).  The order is therefore the same in every
  point in time, and ``search_after`` on it stays valid after the point in time expired and was
  re-opened (in this run or in a later one, from the checkpoint file).
* Every judged document gets ``zhdedup.status`` written (exact repeats have no ``zhdedup.fp``, so
  that is not the marker), and the read query is ``must_not exists zhdedup.status``: whatever was
  written before an interruption is never judged twice, whatever the checkpoint says.
* Before reading, every document that already has ``zhdedup.status`` (from an interrupted run, from
  ``es ingest`` or from the Scrapy pipeline) is loaded back into the in-memory index, in the same
  ``_seq_no`` order.  Our partial updates are written in judging order, and on one shard a write
  gets the next ``_seq_no``, so on a single-shard index a resumed run rebuilds exactly the state of
  an uninterrupted one.  With several shards only the interleaving between shards can differ,
  which can only change which of two equally distant earlier documents a new one is tied to.

Judging happens in Python with the full engine (:class:`Fingerprinter`: SimHash bands and passage
hashes) against an in-memory :class:`EmbeddedStore`; the verdicts go back as bulk partial updates
(``update`` with ``doc``: no scripts, which the minimal distribution lacks).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from elasticsearch import ApiError, BadRequestError, Elasticsearch, NotFoundError
from elasticsearch.helpers import bulk

from scrapy_zhdedup.bands import BandLayout
from scrapy_zhdedup.bloom import ExactFilter
from scrapy_zhdedup.config import DedupConfig
from scrapy_zhdedup.engine import Fingerprinter, Verdict, verdict_for
from scrapy_zhdedup.errors import EmptyTextError, ZhDedupError
from scrapy_zhdedup.persist import atomic_write
from scrapy_zhdedup.store import EmbeddedStore, Match
from scrapy_zhdedup.text import content_hash

from .template import dedup_properties, ensure_layout, read_meta, template_body, zhdedup_fields

logger = logging.getLogger(__name__)

READ_SORT = [{"_seq_no": "asc"}, {"_shard_doc": "asc"}]
DONE_FIELD = "zhdedup.status"
KEEP_ALIVE = "5m"
LARGEST = 10  # clusters listed in the report
EXAMPLES = 3  # member ids shown per listed cluster
CHECKPOINT_FORMAT = 1

Progress = Callable[[int], None]


class Memory:
    """Everything judged so far, on the engine's own :class:`EmbeddedStore` (bands, passages, hashes).

    Judging follows :meth:`Deduper.check` step for step, so an index deduplicated here agrees with
    ``zhdedup scan``.  The cluster id is kept per row as the string found in the index rather than
    derived from the store's first row: when documents are loaded back, a cluster's first document
    may have been deleted since (or sit on another shard, read later), and new members must still
    get the cluster id the index already uses.
    """

    def __init__(self, config: DedupConfig, fingerprinter: Fingerprinter) -> None:
        self.fingerprinter = fingerprinter
        self.store = EmbeddedStore(config.layout,
                                   ExactFilter(error_rate=config.bloom_error_rate,
                                               initial_capacity=config.bloom_capacity),
                                   passage_share=config.passage_share, passage_threshold=config.passage_threshold)
        self.clusters: list[str] = []  # per store row
        self.firsts = 0  # documents that opened a cluster: one per cluster
        self.repeats: Counter[str] = Counter()  # cluster -> later members (memory only for duplicates)
        self.examples: dict[str, list[str]] = {}

    def judge(self, doc_id: str, clean: str) -> tuple[Verdict, list[int]]:
        """The verdict, and the passage keys to store with it (none for an exact repeat)."""
        digest = content_hash(clean)
        exact = self._cluster(self.store.find_exact(digest))
        passages: list[int] = []
        if exact is not None:
            verdict = verdict_for(doc_id, digest, None, exact, exact=True)
        else:
            fp = self.fingerprinter.fingerprint(clean)
            passages = self.fingerprinter.passages(clean)
            near = self._cluster(self.store.find_near(fp, passages))
            verdict = verdict_for(doc_id, digest, fp, near)
            self._add(doc_id, digest, fp, passages, verdict.cluster)
        self._count(verdict.cluster, doc_id)
        return verdict, passages

    def load(self, meta: dict[str, Any], clean: str | None) -> None:
        """Take back a document judged earlier, from its ``zhdedup`` object (and text, for its passages)."""
        cluster, doc_id = meta["cluster"], meta["doc_id"]
        if meta["status"] != "exact":
            passages = self.fingerprinter.passages(clean) if clean is not None else []
            self._add(doc_id, meta["hash"], int(meta["fp"], 16), passages, cluster)
        self._count(cluster, doc_id)

    def _cluster(self, match: Match | None) -> Match | None:
        return None if match is None else Match(match.doc_id, self.clusters[match.row], match.distance, match.row)

    def _add(self, doc_id: str, digest: str, fp: int, passages: list[int], cluster: str) -> None:
        self.store.add(doc_id, digest, fp, passages)
        self.clusters.append(cluster)

    def _count(self, cluster: str, doc_id: str) -> None:
        if doc_id == cluster:
            self.firsts += 1
            return
        self.repeats[cluster] += 1
        members = self.examples.setdefault(cluster, [])
        if len(members) < EXAMPLES - 1:
            members.append(doc_id)

    def report(self) -> dict[str, Any]:
        largest = [{"cluster": c, "size": n + 1, "examples": [c, *self.examples[c]]}
                   for c, n in self.repeats.most_common(LARGEST)]
        return {"clusters": self.firsts, "duplicate_clusters": len(self.repeats), "largest": largest}


@dataclass
class Checkpoint:
    """What a later run needs to go on where this one stopped; written after each acknowledged bulk."""

    path: Path | None
    settings: dict[str, Any]
    after: list[Any] | None = None  # sort values of the last judged document
    skipped: dict[str, str] = field(default_factory=dict)  # _id -> why it could not be judged

    @classmethod
    def open(cls, path: Path | None, settings: dict[str, Any]) -> Checkpoint:
        if path is None or not path.exists():
            return cls(path, settings)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ZhDedupError(f"{path}: unreadable checkpoint ({exc}); delete it to start over") from exc
        if data.get("format") != CHECKPOINT_FORMAT or data.get("settings") != settings:
            raise ZhDedupError(
                f"{path}: checkpoint of a run with other settings ({data.get('settings')}, now {settings}); "
                f"delete it or pass another --checkpoint"
            )
        return cls(path, settings, data.get("after"), dict(data.get("skipped", {})))

    def save(self) -> None:
        if self.path is None:
            return
        payload = json.dumps({"format": CHECKPOINT_FORMAT, "settings": self.settings, "after": self.after,
                              "skipped": self.skipped}, ensure_ascii=False).encode("utf-8")
        atomic_write(self.path, lambda fh: fh.write(payload))


class _Reader:
    """Sorted ``search_after`` pages through a point in time that is re-opened when it expires."""

    def __init__(self, client: Elasticsearch, index: str, batch_size: int) -> None:
        self.client, self.index, self.batch_size = client, index, batch_size
        self.pit: str | None = None

    def _open(self) -> str:
        self.client.indices.refresh(index=self.index)  # a new point in time must see our updates
        self.pit = self.client.open_point_in_time(index=self.index, keep_alive=KEEP_ALIVE)["id"]
        return self.pit

    def pages(self, query: dict[str, Any], source: list[str] | bool,
              after: list[Any] | None = None) -> Iterator[list[dict[str, Any]]]:
        reopened = False
        while True:
            body: dict[str, Any] = {"query": query, "sort": READ_SORT, "size": self.batch_size,
                                    "_source": source, "track_total_hits": False,
                                    "pit": {"id": self.pit or self._open(), "keep_alive": KEEP_ALIVE}}
            if after is not None:
                body["search_after"] = after
            try:
                resp = self.client.search(body=body)
            except NotFoundError:
                if reopened:
                    raise
                self._open()  # the point in time expired (e.g. the run was paused): same order in a new one
                reopened = True
                continue
            reopened = False
            self.pit = resp.get("pit_id", self.pit)
            hits = resp["hits"]["hits"]
            if not hits:
                return
            yield hits
            after = hits[-1]["sort"]

    def close(self) -> None:
        if self.pit is not None:
            try:
                self.client.close_point_in_time(id=self.pit)
            except ApiError:
                pass  # already expired: nothing left to free
            self.pit = None


def dedup_index(client: Elasticsearch, index: str, dedup_cfg: DedupConfig, *, text_field: str = "text",
                html_field: str | None = None, id_field: str | None = None, dry_run: bool = False,
                checkpoint: Path | None = None, batch_size: int = 500,
                progress: Progress | None = None) -> dict[str, Any]:
    """Judge every document of ``index`` not judged yet, write ``zhdedup.*`` back, report the clusters.

    ``progress(n)`` is called with the number of documents just judged.  With ``dry_run`` nothing is
    written (and there is nothing to resume from).
    """
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1")
    layout = dedup_cfg.layout
    if not client.indices.exists(index=index):
        raise ZhDedupError(f"{index}: no such index")
    if dry_run:
        if read_meta(client, index) is not None:
            ensure_layout(client, index, layout)
    else:
        _prepare_mapping(client, index, layout)
    fields = _Fields(text_field, html_field, id_field, Fingerprinter(dedup_cfg))
    settings = {"index": index, "dedup": dataclasses.asdict(dedup_cfg), "text_field": text_field,
                "html_field": html_field, "id_field": id_field}
    state = Checkpoint.open(None if dry_run else checkpoint, settings)
    memory = Memory(dedup_cfg, fields.fingerprinter)
    counts: Counter[str] = Counter()
    started = time.perf_counter()
    reader = _Reader(client, index, batch_size)
    try:
        load_source = ["zhdedup", *fields.text_fields] if fields.fingerprinter.use_passages else ["zhdedup"]
        for page in reader.pages({"exists": {"field": DONE_FIELD}}, load_source):
            for hit in page:
                try:
                    memory.load(hit["_source"]["zhdedup"], fields.clean_or_none(hit["_source"]))
                except (KeyError, TypeError, ValueError) as exc:
                    raise ZhDedupError(f"{index}: document {hit['_id']} has a damaged zhdedup object "
                                       f"({type(exc).__name__}: {exc})") from exc
            counts["loaded"] += len(page)
        load_seconds = time.perf_counter() - started
        query = {"bool": {"must_not": [{"exists": {"field": DONE_FIELD}}]}}
        pending: list[dict[str, Any]] = []
        try:
            for page in reader.pages(query, fields.source, state.after):
                for hit in page:
                    if hit["_id"] in state.skipped:
                        continue
                    try:
                        doc_id, clean = fields.read(hit)
                    except ValueError as exc:  # EmptyTextError, or no usable id
                        state.skipped[hit["_id"]] = str(exc)
                    else:
                        verdict, passages = memory.judge(doc_id, clean)
                        counts[verdict.status] += 1
                        pending.append({"_op_type": "update", "_id": hit["_id"], "retry_on_conflict": 3, "doc": {
                            "zhdedup": zhdedup_fields(verdict, layout, datetime.now(timezone.utc),
                                                      passages=passages)}})
                    state.after = hit["sort"]
                    if progress is not None:
                        progress(1)
                _write(client, pending, dry_run, state)
        except BaseException:
            if pending:  # interrupted mid-page: keep what was judged, so a rerun need not redo it
                try:
                    _write(client, pending, dry_run, state)
                except Exception as exc:  # Elasticsearch may be the reason we stopped
                    logger.warning("%s: the last %d verdicts were not saved (%s); a rerun judges them again",
                                   index, len(pending), exc)
            raise
    finally:
        reader.close()
    if not dry_run:
        client.indices.refresh(index=index)
    seconds = time.perf_counter() - started
    judged = counts["unique"] + counts["exact"] + counts["near"]
    return {
        "index": index, "dry_run": dry_run, "loaded": counts["loaded"], "judged": judged,
        "unique": counts["unique"], "exact": counts["exact"], "near": counts["near"],
        "skipped": len(state.skipped), "skipped_examples": dict(list(state.skipped.items())[:20]),
        "seconds": round(seconds, 2), "load_seconds": round(load_seconds, 2),
        "docs_per_s": round(judged / (seconds - load_seconds), 1) if seconds > load_seconds and judged else 0.0,
        **memory.report(),
    }


def _prepare_mapping(client: Elasticsearch, index: str, layout: BandLayout) -> None:
    """Add the ``zhdedup`` object and the layout to an existing index; refuse a different layout."""
    current = client.indices.get_mapping(index=index)[index]["mappings"]
    meta = current.get("_meta", {})
    if "zhdedup" not in meta:
        ours = template_body(index, layout)["template"]["mappings"]["_meta"]
        try:  # _meta is replaced as a whole, so the index's own keys are sent back with ours
            client.indices.put_mapping(index=index, properties=dedup_properties(layout), meta={**meta, **ours})
        except BadRequestError as exc:
            raise ZhDedupError(f"{index}: cannot add the zhdedup fields to its mapping ({exc.message}): "
                               f"{exc.info}") from exc
    ensure_layout(client, index, layout)


@dataclass(frozen=True)
class _Fields:
    """Where a document keeps its text, HTML and id, and how they become the engine's clean text."""

    text_field: str
    html_field: str | None
    id_field: str | None
    fingerprinter: Fingerprinter

    @property
    def text_fields(self) -> list[str]:
        return [f for f in (self.html_field, self.text_field) if f]

    @property
    def source(self) -> list[str]:
        return [*self.text_fields, *([self.id_field] if self.id_field else [])]

    def clean(self, source: dict[str, Any]) -> str:
        """HTML wins over text when both are there, as in the pipeline."""
        html = _get(source, self.html_field) if self.html_field else None
        text = _get(source, self.text_field)
        if not isinstance(html, str) and not isinstance(text, str):
            raise EmptyTextError(f"no string in {' or '.join(repr(f) for f in self.text_fields)}")
        return self.fingerprinter.clean(text=text if isinstance(text, str) else None,
                                        html=html if isinstance(html, str) else None)

    def clean_or_none(self, source: dict[str, Any]) -> str | None:
        try:
            return self.clean(source)
        except EmptyTextError:
            return None

    def read(self, hit: dict[str, Any]) -> tuple[str, str]:
        source = hit.get("_source") or {}
        doc_id = _get(source, self.id_field) if self.id_field else hit["_id"]
        if doc_id is None or isinstance(doc_id, (dict, list, bool)) or str(doc_id) == "":
            raise ValueError(f"no usable id in {self.id_field!r}")
        return str(doc_id), self.clean(source)


def _write(client: Elasticsearch, pending: list[dict[str, Any]], dry_run: bool, state: Checkpoint) -> None:
    """Send the page's updates; the checkpoint moves only once Elasticsearch took all of them."""
    actions = list(pending)
    pending.clear()  # taken: a failure below must not make the caller send them again
    if dry_run:
        return
    if actions:
        index = state.settings["index"]
        _, errors = bulk(client, actions, index=index, max_retries=5, raise_on_error=False, stats_only=False)
        if errors:
            raise ZhDedupError(f"{index}: {len(errors)} of {len(actions)} updates failed, first: {errors[0]}")
    state.save()


def _get(source: dict[str, Any], path: str) -> Any:
    """Value at a dotted path (``a.b`` is ``{"a": {"b": ...}}`` or a literal ``"a.b"`` key)."""
    if path in source:
        return source[path]
    value: Any = source
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value
