"""Documents put straight into an index, as a writer would have stored them and claimed their keys
(lookup and failure tests)."""

from __future__ import annotations

from datetime import datetime, timezone

from elasticsearch import Elasticsearch

from es_plugin.backend.registry import Claimant, Registry
from es_plugin.backend.retry import RetryPolicy
from es_plugin.backend.stats import EsStats
from es_plugin.index.document import Stored
from es_plugin.index.template import install
from es_plugin.operations import drive
from scrapy_zhdedup.config import DedupConfig
from scrapy_zhdedup.index.bands import BandLayout
from scrapy_zhdedup.index.nearindex import CandidateKeys
from scrapy_zhdedup.model import Features, Verdict
from scrapy_zhdedup.similarity.rule import NearRule

DEDUP = DedupConfig()


def store(client: Elasticsearch, index: str, docs: list[tuple[str, Features]]) -> None:
    """Index ``docs`` (id, features) as unique texts seen at the same moment, in this order, and claim
    their keys."""
    layout = BandLayout.from_config(DEDUP)
    install(client, index, layout)
    seen = datetime(2026, 1, 1, tzinfo=timezone.utc)
    operations: list[dict[str, object]] = []
    for doc_id, features in docs:
        verdict = Verdict(doc_id, "unique", None, None, doc_id, doc_id, features.fingerprint)
        operations += [{"create": {"_index": index, "_id": doc_id}},
                       Stored.of(verdict, seen, features=features).to_source(layout)]
    assert not client.bulk(operations=operations, refresh=True)["errors"]
    registry = Registry(index, CandidateKeys.from_config(DEDUP), NearRule.from_config(DEDUP), RetryPolicy(0),
                        EsStats())  # their keys claimed, in this order
    drive(client, registry.claim([Claimant(doc_id, doc_id, features) for doc_id, features in docs], judge=False))
