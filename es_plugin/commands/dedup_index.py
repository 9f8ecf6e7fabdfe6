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

Judging is :func:`~scrapy_zhdedup.judge.judge` with the full engine (:class:`Fingerprinter`: SimHash
bands and passage hashes) against an in-memory :class:`IndexMemory`, so an index deduplicated here
agrees with ``zhdedup scan``; the verdicts go back through writer.py as bulk partial updates
(``update`` with ``doc``: no scripts, which the minimal distribution lacks).
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from elasticsearch import BadRequestError, Elasticsearch

from scrapy_zhdedup.config import DedupConfig, setting_name
from scrapy_zhdedup.errors import ConfigError, EmptyTextError
from scrapy_zhdedup.index.bands import BandLayout
from scrapy_zhdedup.index.bloom import ExactFilter
from scrapy_zhdedup.index.nearindex import CandidateKeys
from scrapy_zhdedup.judge import judge
from scrapy_zhdedup.memory.store import MemoryStore
from scrapy_zhdedup.model import Match, Prepared, Verdict
from scrapy_zhdedup.similarity.fingerprinter import Fingerprinter
from scrapy_zhdedup.similarity.rule import NearRule
from scrapy_zhdedup.text.validate import check_id
from scrapy_zhdedup.workers import PreparePool

from ..backend.registry import fill
from ..backend.writer import Action, BulkWriter, describe
from ..errors import EsIndexError, WritesRejectedError
from ..index.chinese import segment
from ..index.document import FIELD, STATUS, WHOLE, Stored, dedup_properties
from ..index.template import claim_originals, ensure_layout, read_meta, template_body
from ..operations import drive
from .checkpoint import Checkpoint
from .pointintime import PointInTime

logger = logging.getLogger(__name__)

READ_SORT = [{"_seq_no": "asc"}, {"_shard_doc": "asc"}]
DONE_FIELD = STATUS
LARGEST = 10  # clusters listed in the report
EXAMPLES = 3  # member ids shown per listed cluster
FIELD_SAMPLE = 100  # documents looked at for a field that cannot be searched for

Progress = Callable[[int], None]


class IndexMemory(MemoryStore):
    """The engine's memory of judged documents, with each row's cluster id kept as the string found in the index.

    When documents are loaded back, a cluster's first document may have been deleted since (or sit
    on another shard, read later), and new members must still get the cluster id the index already
    uses, so the cluster is not derived from the store's first row.
    """

    def __init__(self, config: DedupConfig) -> None:
        super().__init__(CandidateKeys.from_config(config),
                         ExactFilter(error_rate=config.bloom_error_rate, initial_capacity=config.bloom_capacity),
                         rule=NearRule.from_config(config))
        self.clusters: list[str] = []  # per row

    def cluster(self, row: int) -> str:
        return self.clusters[row]

    def remember(self, prepared: Prepared, verdict: Verdict, match: Match | None) -> None:
        if verdict.status != "exact":
            self.clusters.append(verdict.cluster)
        super().remember(prepared, verdict, match)

    def load(self, stored: Stored, passages: list[int]) -> None:
        """Take back a document judged earlier, from its ``zhdedup`` object and its passage keys: an
        original as a candidate for later documents, a near repeat only for its exact copies."""
        if stored.status == "exact":
            return
        if stored.hash is None:
            raise ValueError(f"no content hash stored for {stored.doc_id!r}")
        repeats = None
        if stored.status == "near":
            repeats = Match(stored.dup_of or "", stored.cluster, stored.distance or 0, stored.similarity or 0.0,
                            stored.contained or 0.0, stored.reason or "similar", row=self.row_of(stored.dup_of or ""))
        self.add(stored.doc_id, stored.hash, stored.features(passages), repeats)
        self.clusters.append(stored.cluster)


class ClusterReport:
    """How many clusters, and the largest with a few member ids (memory only for duplicates)."""

    def __init__(self) -> None:
        self.firsts = 0  # documents that opened a cluster: one per cluster
        self.repeats: Counter[str] = Counter()  # cluster -> later members
        self.examples: dict[str, list[str]] = {}

    def count(self, cluster: str, doc_id: str) -> None:
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


def dedup_index(client: Elasticsearch, index: str, dedup_cfg: DedupConfig, *, text_field: str = "text",
                html_field: str | None = None, id_field: str | None = None, dry_run: bool = False,
                checkpoint: Path | None = None, batch_size: int = 500, workers: int | None = None,
                progress: Progress | None = None, restart: bool = False) -> dict[str, Any]:
    """Judge every document of ``index`` not judged yet, write ``zhdedup.*`` back, report the clusters.

    Documents are cleaned and fingerprinted by ``workers`` processes (default: the machine's cores)
    and judged here in read order, so the verdicts do not depend on ``workers``.

    ``progress(n)`` is called with the number of documents just judged.  With ``dry_run`` nothing is
    written (and there is nothing to resume from).  ``restart`` ignores the checkpoint: the documents are
    read from the start, and those the index holds a verdict for are loaded, not judged again.

    A field no document has (``text_field``, ``html_field``, ``id_field``: a typo) is refused before anything
    is read or written, naming the fields the index has.
    """
    if batch_size < 1:
        raise ConfigError("batch_size must be at least 1")
    if not client.indices.exists(index=index):
        raise EsIndexError(f"{index}: no such index")
    _check_fields(client, index, text_field, html_field, id_field)
    layout = BandLayout.from_config(dedup_cfg)
    if dry_run:
        if read_meta(client, index) is not None:
            ensure_layout(client, index, layout)
    else:
        _prepare_mapping(client, index, layout)
    fields = _Fields(text_field, html_field, id_field)
    identity = {"index": index, "dedup": dataclasses.asdict(dedup_cfg), "text_field": text_field,
                "html_field": html_field, "id_field": id_field}
    state = Checkpoint.open(None if dry_run else checkpoint, identity, {"after": None, "skipped": {}},
                            restart=restart, named=_option,
                            way_out="start over with --restart (the verdicts the index holds are kept), or pass "
                                    "another --checkpoint")
    run = _Run(client, index, layout, fields, Fingerprinter(dedup_cfg), IndexMemory(dedup_cfg),
               ClusterReport(), state, BulkWriter(index), dry_run)
    started = time.perf_counter()
    with PointInTime(client, index, refresh=True) as reader, PreparePool(dedup_cfg, _prepare_hit, workers) as pool:
        loaded = run.load(reader, batch_size)
        load_seconds = time.perf_counter() - started
        counts = run.judge_rest(reader, batch_size, pool, progress)
    if not dry_run:
        client.indices.refresh(index=index)
        claim_originals(client, index, lambda name: fill(name, CandidateKeys.from_config(dedup_cfg)))  # for writers
    seconds = time.perf_counter() - started
    judged = counts["unique"] + counts["exact"] + counts["near"]
    skipped = state.progress["skipped"]
    return {
        "index": index, "dry_run": dry_run, "loaded": loaded, "judged": judged,
        "unique": counts["unique"], "exact": counts["exact"], "near": counts["near"],
        "skipped": len(skipped), "skipped_examples": dict(list(skipped.items())[:20]),
        "seconds": round(seconds, 2), "load_seconds": round(load_seconds, 2),
        "docs_per_s": round(judged / (seconds - load_seconds), 1) if seconds > load_seconds and judged else 0.0,
        **run.clusters.report(),
    }


@dataclass
class _Run:
    """One ``dedup_index`` call: load what was judged before, then judge the rest page by page."""

    client: Elasticsearch
    index: str
    layout: BandLayout
    fields: _Fields
    fingerprinter: Fingerprinter
    memory: IndexMemory
    clusters: ClusterReport
    state: Checkpoint
    writer: BulkWriter
    dry_run: bool

    def load(self, reader: PointInTime, batch_size: int) -> int:
        """Documents judged by an earlier run (or by the pipeline), back into memory; returns how many."""
        fingerprinter = self.fingerprinter
        source = [*WHOLE, *self.fields.text_fields] if fingerprinter.use_passages else WHOLE
        body = {"query": {"exists": {"field": DONE_FIELD}}, "sort": READ_SORT, "size": batch_size,
                "_source": source, "track_total_hits": False}
        loaded = 0
        for page in reader.pages(body, reopen=True):
            for hit in page:
                try:
                    stored = Stored.from_source(hit["_source"])
                    if stored is None:
                        raise KeyError(FIELD)
                    clean = self.fields.clean_or_none(fingerprinter, hit["_source"])
                    self.memory.load(stored, fingerprinter.passages(clean) if clean is not None else [])
                    self.clusters.count(stored.cluster, stored.doc_id)
                except (KeyError, TypeError, ValueError) as exc:
                    raise EsIndexError(f"{self.index}: document {hit['_id']} has a damaged zhdedup object "
                                       f"({type(exc).__name__}: {exc})") from exc
            loaded += len(page)
        return loaded

    def judge_rest(self, reader: PointInTime, batch_size: int, pool: PreparePool[tuple[_Fields, dict[str, Any]], Prepared],
                   progress: Progress | None) -> Counter[str]:
        counts: Counter[str] = Counter()
        skipped, at = self.state.progress["skipped"], self.state.progress
        body = {"query": {"bool": {"must_not": [{"exists": {"field": DONE_FIELD}}]}}, "sort": READ_SORT,
                "size": batch_size, "_source": self.fields.source, "track_total_hits": False}
        pending: list[Action] = []
        # (hit, ends its page): the pool prepares ahead across pages, the updates go out page by page
        hits, jobs = itertools.tee((hit, n == len(page)) for page in reader.pages(body, at["after"], reopen=True)
                                   for n, hit in enumerate(page, start=1))
        try:
            for (hit, page_end), prepared in zip(hits, pool.map((self.fields, hit) for hit, _ in jobs)):
                if hit["_id"] in skipped:  # skipped by an earlier run
                    pass
                elif isinstance(prepared, Exception):  # EmptyTextError, or no usable id
                    skipped[hit["_id"]] = str(prepared)
                else:
                    featurize = self.fingerprinter.features
                    verdict = judge(prepared, self.memory, featurize)
                    self.clusters.count(verdict.cluster, verdict.doc_id)
                    counts[verdict.status] += 1
                    features = prepared.featured(featurize) if verdict.status != "exact" else None
                    pending.append(Action("update", hit["_id"], Stored.of(
                        verdict, datetime.now(timezone.utc), features=features,
                        words=segment(prepared.clean)).to_source(self.layout)))
                at["after"] = hit["sort"]
                if progress is not None:
                    progress(1)
                if page_end:
                    self._write(pending)
        except BaseException:
            if pending:  # interrupted mid-page: keep what was judged, so a rerun need not redo it
                try:
                    self._write(pending)
                except Exception as exc:  # Elasticsearch may be the reason we stopped
                    logger.warning("%s: the last %d verdicts were not saved (%s); a rerun judges them again",
                                   self.index, len(pending), exc)
            raise
        return counts

    def _write(self, pending: list[Action]) -> None:
        """Send the page's updates; the checkpoint moves only once Elasticsearch took all of them."""
        actions = list(pending)
        pending.clear()  # taken: a failure below must not make the caller send them again
        if self.dry_run:
            return
        if actions:
            failed = drive(self.client, self.writer.write(actions)).failed
            if failed:
                action, error = failed[0]
                raise WritesRejectedError(f"{self.index}: {len(failed)} of {len(actions)} updates failed, first: "
                                          f"{action.id}: {describe(error)[1]}")
        self.state.save()


def _option(key: str) -> str:
    """An identity key of the checkpoint as the option that sets it."""
    if key.startswith("dedup."):
        return setting_name(key.removeprefix("dedup."))
    return "--" + key.replace("_", "-")


def _check_fields(client: Elasticsearch, index: str, text_field: str, html_field: str | None,
                  id_field: str | None) -> None:
    """A field named on the command line that no document of a non-empty index has is a typo: a run would
    skip every document and leave a checkpoint in the way of the corrected command.  Refused, naming the
    fields the documents have."""
    if not client.count(index=index)["count"]:
        return
    wanted = [("--html-field or --text-field" if html_field else "--text-field", [f for f in (html_field, text_field) if f])]
    if id_field:
        wanted.append(("--id-field", [id_field]))
    for option, names in wanted:
        query = {"bool": {"should": [{"exists": {"field": name}} for name in names]}}
        if client.count(index=index, query=query)["count"]:
            continue
        # not searchable (mapped with "index": false, or not mapped under "dynamic": false): look at some documents
        sample = client.search(index=index, size=FIELD_SAMPLE, source_includes=names)["hits"]["hits"]
        if any(_get(hit.get("_source") or {}, name) is not None for hit in sample for name in names):
            continue
        mapped = _mapped_fields(client.indices.get_mapping(index=index)[index]["mappings"])
        said = " or ".join(repr(n) for n in names)
        raise ConfigError(f"{index}: no document has a field {said} ({option}); its documents have "
                          f"{', '.join(mapped) or 'no fields'}")


def _mapped_fields(mapping: dict[str, Any], prefix: str = "") -> list[str]:
    """The mapped fields, dotted, without our own ``zhdedup`` object."""
    out: list[str] = []
    for name, spec in mapping.get("properties", {}).items():
        if not prefix and name == FIELD:
            continue
        if "properties" in spec:
            out += _mapped_fields(spec, f"{prefix}{name}.")
        else:
            out.append(prefix + name)
    return out


def _prepare_mapping(client: Elasticsearch, index: str, layout: BandLayout) -> None:
    """Add the ``zhdedup`` object and the layout to an existing index; refuse a different layout."""
    current = client.indices.get_mapping(index=index)[index]["mappings"]
    meta = current.get("_meta", {})
    if "zhdedup" not in meta:
        ours = template_body(index, layout)["template"]["mappings"]["_meta"]
        try:  # _meta is replaced as a whole, so the index's own keys are sent back with ours
            client.indices.put_mapping(index=index, properties=dedup_properties(layout), meta={**meta, **ours})
        except BadRequestError as exc:
            raise EsIndexError(f"{index}: cannot add the zhdedup fields to its mapping ({exc.message}): "
                               f"{exc.info}") from exc
    ensure_layout(client, index, layout)


@dataclass(frozen=True)
class _Fields:
    """Where a document keeps its text, HTML and id, and how they become the engine's input
    (picklable: worker processes prepare hits with their own fingerprinter)."""

    text_field: str
    html_field: str | None
    id_field: str | None

    @property
    def text_fields(self) -> list[str]:
        return [f for f in (self.html_field, self.text_field) if f]

    @property
    def source(self) -> list[str]:
        return [*self.text_fields, *([self.id_field] if self.id_field else [])]

    def _inputs(self, source: dict[str, Any]) -> tuple[str | None, str | None]:
        """Text and HTML strings (HTML wins over text when both are there, as in the pipeline)."""
        html = _get(source, self.html_field) if self.html_field else None
        text = _get(source, self.text_field)
        if not isinstance(html, str) and not isinstance(text, str):
            raise EmptyTextError(f"no string in {' or '.join(repr(f) for f in self.text_fields)}")
        return text if isinstance(text, str) else None, html if isinstance(html, str) else None

    def clean_or_none(self, fingerprinter: Fingerprinter, source: dict[str, Any]) -> str | None:
        try:
            text, html = self._inputs(source)
            return fingerprinter.clean(text=text, html=html)
        except EmptyTextError:
            return None

    def prepare(self, fingerprinter: Fingerprinter, hit: dict[str, Any]) -> Prepared:
        source = hit.get("_source") or {}
        doc_id = check_id(_get(source, self.id_field) if self.id_field else hit["_id"])
        text, html = self._inputs(source)
        return fingerprinter.prepare(doc_id, text=text, html=html)


def _prepare_hit(fingerprinter: Fingerprinter, job: tuple[_Fields, dict[str, Any]]) -> Prepared:
    """The worker processes' step (workers.py)."""
    fields, hit = job
    return fields.prepare(fingerprinter, hit)


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
