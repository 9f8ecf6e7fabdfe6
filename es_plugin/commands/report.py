"""``zhdedup es report``: the report's verdicts and texts from an index (scrapy_zhdedup/report/).

Two passes through a point in time: every document's ``zhdedup`` fields (a few hundred bytes each,
no text), then the texts of the documents in the clusters shown only, by ``_id``.  An index written
in drop mode holds first copies only: it has no clusters to show, and the report says so.
"""

from __future__ import annotations

from typing import Any

from elasticsearch import Elasticsearch

from scrapy_zhdedup.report.findings import Doc, Findings, clusters, shown_ids

from ..index.document import NAMED, REPORTED, STATUS, Stored
from .pointintime import PointInTime

PAGE = 2_000  # documents per page of the first pass
FETCH = 200  # texts per request of the second


def from_index(client: Elasticsearch, index: str, text_field: str, *, max_clusters: int) -> Findings:
    """Every judged document of ``index`` (in the order they were judged), and the texts of those shown."""
    found: list[tuple[str, str, Doc]] = []  # (seen_at, _id, doc)
    body = {"size": PAGE, "_source": REPORTED, "query": {"exists": {"field": STATUS}},
            "sort": [{"_shard_doc": "asc"}]}
    with PointInTime(client, index) as reader:
        for hits in reader.pages(body):
            for hit in hits:
                stored = Stored.from_source(hit["_source"])
                if stored is not None:
                    found.append((stored.seen_at or "", hit["_id"], Doc.of(stored)))
    found.sort(key=lambda f: f[0])
    docs = [doc for _, _, doc in found]
    findings = Findings(f"Elasticsearch index {index} (texts: {text_field})", docs)
    if docs and not any(d.status != "unique" for d in docs):
        findings.notes.append("Every document here is unique: an index written in drop mode keeps first copies "
                              "only (ZHDEDUP_MODE = \"annotate\", es ingest's default, keeps the repeats too).")
    wanted = shown_ids(clusters(docs), max_clusters)
    ids = [_id for _, _id, doc in found if doc.doc_id in wanted]
    for start in range(0, len(ids), FETCH):
        response = client.mget(index=index, ids=ids[start : start + FETCH], source_includes=[text_field, *NAMED])
        for got in response["docs"]:
            text = _field(got.get("_source") or {}, text_field)
            stored = Stored.from_source(got["_source"]) if got.get("found") else None
            if stored is not None and isinstance(text, str):
                findings.texts[stored.doc_id] = text
    return findings


def _field(source: dict[str, Any], dotted: str) -> Any:
    """A field of ``_source`` by its dotted name (``content`` or ``article.body``)."""
    value: Any = source
    for part in dotted.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value
