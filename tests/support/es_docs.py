"""Documents put straight into an index, as a writer would have stored them (lookup and failure tests)."""

from __future__ import annotations

from datetime import datetime, timezone

from elasticsearch import Elasticsearch

from es_plugin.index.document import Stored
from es_plugin.index.template import install
from scrapy_zhdedup.config import DedupConfig
from scrapy_zhdedup.index.bands import BandLayout
from scrapy_zhdedup.model import Features, Verdict


def store(client: Elasticsearch, index: str, docs: list[tuple[str, Features]]) -> None:
    """Index ``docs`` (id, features) as unique texts seen at the same moment, in this order."""
    install(client, index, BandLayout.from_config(DedupConfig()))
    seen = datetime(2026, 1, 1, tzinfo=timezone.utc)
    operations: list[dict[str, object]] = []
    for doc_id, features in docs:
        verdict = Verdict(doc_id, "unique", None, None, doc_id, doc_id, features.fingerprint)
        operations += [{"create": {"_index": index, "_id": doc_id}},
                       Stored.of(verdict, seen, features=features).to_source(BandLayout.from_config(DedupConfig()))]
    assert not client.bulk(operations=operations, refresh=True)["errors"]
