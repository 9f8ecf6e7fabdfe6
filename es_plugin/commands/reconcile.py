"""Repair what concurrent writers could not see: near pairs stored by different processes within one refresh.

Each writer checks Elasticsearch and its own unwritten buffer, but not another writer's buffer, so two
near-duplicates written by two processes within a refresh interval are both stored as unique.
``reconcile`` reads the whole index in the order the writers judged in, the order of their claims in
the key registry (order.py; one writer judging in it is what several should equal): who each document
is and what its place depends on from one point in time, then the features by ``_id``, a page at a time
in that order.  It feeds every document's stored features into one in-memory near index — a self-join
on the SimHash band, sketch and passage keys, verified on the sketches, never pairwise, by the same
rule as the embedded store (nearindex.py: a document is compared with cluster originals only) —
and marks each still-unique document that has an earlier near or exact neighbour in another cluster,
with bulk partial updates (core APIs only, no scripts).
Documents whose cluster was the marked document's move to the new cluster in the same pass.
Then the key registry follows (backend/registry.py): claims of documents that are not stored originals
(marked here, or left by a writer killed between claiming and writing) are removed, and originals
whose keys are not claimed (claims that failed past their retries, a killed writer's journal nobody took over)
claim them.

A reconcile stopped anywhere (killed, the node gone) leaves some changes made and some not; run it
again and the index ends as one uninterrupted run would leave it: the marks change no claim before
the registry follows them, so the rerun reads in the same order.  A marked document says where its
cluster went (its own new cluster), so its old members follow it on the rerun; with ``delete`` every
move is made before the first delete, so no deleted head takes that knowledge with it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from elasticsearch import Elasticsearch

from scrapy_zhdedup.config import DedupConfig
from scrapy_zhdedup.index.nearindex import CandidateKeys, NearIndex
from scrapy_zhdedup.model import Features, Match, verdict_for
from scrapy_zhdedup.similarity.rule import NearRule

from ..backend.registry import fill, prune
from ..backend.retry import RetryPolicy, got_all
from ..backend.stats import EsStats
from ..backend.writer import Action, BulkWriter, describe
from ..errors import LookupItemError, WritesRejectedError
from ..index.document import FIELD, REJOINED, Stored, cluster_update, includes, verdict_update
from ..index.template import ensure_layout, registry_name
from ..operations import Call, Steps, drive
from .order import Placed, claim_stamps, order
from .pointintime import PointInTime

PAGE = 5000
BULK = 1000
PLACED = includes("status", "seen_at", "dup_of")  # what a document's place depends on (order.py)


def _scan(client: Elasticsearch, index: str,
          progress: Callable[[int], None] | None) -> Iterator[tuple[str, str, Stored | None]]:
    """Every document's ``_id``, index and ``zhdedup`` object (None if it has none) in the writers' order
    (order.py): who each is, from one point in time, then the features of a page at a time, by ``_id``."""
    stamps = claim_stamps(client, index)
    docs: list[Placed] = []
    where: list[str] = []  # each document's index (``index`` may be an alias or a pattern)
    body = {"size": PAGE, "_source": PLACED, "sort": [{"_shard_doc": "asc"}], "track_total_hits": False}
    with PointInTime(client, index, refresh=True) as reader:  # every acknowledged write, ours of a stopped run too
        for hits in reader.pages(body):
            docs += (_placed(hit["_id"], hit["_source"]) for hit in hits)
            where += (hit["_index"] for hit in hits)
    rows = order(docs, stamps)
    for start in range(0, len(rows), PAGE):
        page = rows[start:start + PAGE]
        sources = drive(client, _sources([(where[row], docs[row].id) for row in page]))
        for row in page:
            source = sources.get((where[row], docs[row].id))
            if source is not None:  # else deleted since (another reconcile's --delete)
                yield docs[row].id, where[row], Stored.from_source(source) if FIELD in source else None
        if progress is not None:
            progress(len(page))


def _placed(_id: str, source: dict[str, Any]) -> Placed:
    stored = Stored.from_source(source) if FIELD in source else None
    if stored is None:
        return Placed(_id, _id, None, None, None)
    return Placed(_id, stored.doc_id or _id, stored.status, stored.seen_at, stored.dup_of)


def _sources(ids: list[tuple[str, str]]) -> Steps:
    """Steps: the ``_source`` (what the self-join reads) of each (index, ``_id``) found, by one realtime
    ``mget`` per index."""
    by_index: dict[str, list[str]] = defaultdict(list)
    for in_index, _id in ids:
        by_index[in_index].append(_id)
    policy, stats = RetryPolicy(), EsStats()
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for in_index, names in by_index.items():
        response = yield from policy.call(_mget(in_index, names), stats, got_all)
        for doc in response["docs"]:
            if "error" in doc:
                raise LookupItemError(doc["error"])
            if doc.get("found"):
                found[(in_index, doc["_id"])] = doc["_source"]
    return found


def _mget(index: str, ids: list[str]) -> Call:
    return lambda client: client.mget(index=index, ids=ids, source_includes=REJOINED, realtime=True)


def reconcile(client: Elasticsearch, index: str, config: DedupConfig, *, apply: bool = True, delete: bool = False,
              progress: Callable[[int], None] | None = None) -> dict[str, int]:
    """Find and mark (or, with ``delete``, remove) near/exact pairs that writers missed.

    ``apply=False`` only counts; ``config`` is the writers' (its layout and near rule).
    ``progress`` is called with the number of documents read per page (a tqdm bar's ``update``
    fits).  Returns the counts: ``scanned``, ``pairs`` (missed pairs found), ``marked``,
    ``reclustered`` (documents moved to the cluster their old cluster head joined), ``deleted`` and
    ``clusters`` (distinct clusters among the documents kept).
    """
    keys = CandidateKeys.from_config(config)
    ensure_layout(client, index, keys.layout)
    writer = BulkWriter(index)
    rows = _Rows(NearIndex(keys, NearRule.from_config(config)))
    moved: dict[str, str] = {}  # old cluster id (its head's doc_id) -> cluster it joined
    deletes: list[Action] = []  # sent once every move is (see the module's docstring)
    clusters: set[str] = set()
    counts = {"scanned": 0, "pairs": 0, "marked": 0, "reclustered": 0, "deleted": 0, "clusters": 0}
    actions: list[Action] = []

    def emit(action: Action) -> None:
        actions.append(action)
        if len(actions) >= BULK:
            _send(client, writer, actions, apply)

    for _id, in_index, stored in _scan(client, index, progress):
        counts["scanned"] += 1
        name = stored.doc_id if stored is not None and stored.doc_id else _id
        stored_cluster = stored.cluster if stored is not None and stored.cluster else name
        cluster = moved.get(stored_cluster, stored_cluster)
        features = stored.features() if stored is not None and stored.sketch is not None else None
        content_hash = stored.hash if stored is not None else None
        original = stored is not None and stored.status == "unique"  # a candidate for later documents, unless marked
        earlier = rows.earlier(features, cluster) if features is not None and original else None
        if earlier is not None:
            counts["pairs"] += 1
            moved[stored_cluster] = earlier.cluster
            if delete:
                counts["deleted"] += 1
                deletes.append(Action("delete", _id, index=in_index))
                continue
            counts["marked"] += 1
            verdict = verdict_for(name, content_hash or "", None, earlier, exact=rows.same_text(earlier, content_hash))
            emit(Action("update", _id, verdict_update(verdict), index=in_index))
            cluster, original = earlier.cluster, False
        elif cluster != stored_cluster:
            counts["reclustered"] += 1
            emit(Action("update", _id, cluster_update(cluster), index=in_index))
        if cluster != name:  # a cluster named after this document (its head once) follows it
            moved[name] = cluster
        clusters.add(cluster)
        if features is not None:
            rows.add(features, original, name, cluster, content_hash or "")
    _send(client, writer, actions, apply)  # every move sent before the first delete, not in one bulk with it
    for action in deletes:
        emit(action)
    _send(client, writer, actions, apply)
    if apply and (counts["marked"] or counts["deleted"] or counts["reclustered"]):
        client.indices.refresh(index=index)
    if apply and client.indices.exists(index=registry_name(index)):  # the key registry follows the marks
        counts["claims_removed"] = drive(client, prune(index, keys))
        drive(client, fill(index, keys))
    counts["clusters"] = len(clusters)
    return counts


@dataclass
class _Rows:
    """The documents read so far with features: the near index, and per row the document's id, its
    cluster now and its content hash."""

    near: NearIndex
    docs: list[str] = field(default_factory=list)
    clusters: list[str] = field(default_factory=list)
    hashes: list[str] = field(default_factory=list)

    def add(self, features: Features, original: bool, doc_id: str, cluster: str, content_hash: str) -> None:
        self.near.add(features, original)
        self.docs.append(doc_id)
        self.clusters.append(cluster)
        self.hashes.append(content_hash)

    def earlier(self, features: Features, cluster: str) -> Match | None:
        """The nearest earlier original, if it is in another cluster than ``cluster``."""
        match = self.near.nearest(features)
        if match is None or self.clusters[match.row] == cluster:
            return None
        return Match(self.docs[match.row], self.clusters[match.row], match.distance, match.similarity,
                     match.contained, match.reason, row=match.row)

    def same_text(self, earlier: Match, content_hash: str | None) -> bool:
        return self.hashes[earlier.row] == content_hash


def _send(client: Elasticsearch, writer: BulkWriter, actions: list[Action], apply: bool) -> None:
    """Bulk the buffered partial updates/deletes (nothing in a dry run); raise if any was rejected."""
    if apply and actions:
        failed = drive(client, writer.write(actions)).failed
        if failed:
            action, error = failed[0]
            raise WritesRejectedError(f"reconcile: {len(failed)} of {len(actions)} changes were rejected, e.g. "
                                      f"{action.id}: {describe(error)[1]}")
    actions.clear()
