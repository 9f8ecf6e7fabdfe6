"""The sizing benchmarks load the key registry by bulk (benchmarks/es_lookup.py ``KeyOwners``) instead of
``registry.fill``, which takes an hour at 1M documents: what they load must be what ``fill`` writes."""

from __future__ import annotations

import random
from datetime import datetime, timezone

import pytest
from elasticsearch import Elasticsearch, helpers

from benchmarks.es_lookup import KeyOwners, bulk_body
from es_plugin.backend.registry import OWNERS, _stamp_at, fill
from es_plugin.index.template import install, registry_name
from es_plugin.operations import drive
from scrapy_zhdedup.config import DedupConfig
from scrapy_zhdedup.index.bands import BandLayout
from scrapy_zhdedup.index.nearindex import MAX_POSTINGS, CandidateKeys
from scrapy_zhdedup.model import Features
from scrapy_zhdedup.similarity.sketch import band_keys, sketch
from scrapy_zhdedup.text.clean import content_hash

pytestmark = pytest.mark.es

ALPHABET = "的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动同工也能下过子说产种面而方后多定"


def test_bulk_loaded_registry_equals_what_fill_writes(es_client: Elasticsearch, index: str) -> None:
    """1,300 originals, half of them near copies of one text (their keys held by hundreds of originals,
    across ``fill``'s pages of 500): the same key documents, owners and stamps in the same order."""
    rng = random.Random(7)
    base = "".join(rng.choice(ALPHABET) for _ in range(400))
    docs = []
    for i in range(1300):
        text = (base if i % 2 == 0 else "".join(rng.choice(ALPHABET) for _ in range(400))) + \
            "".join(rng.choice(ALPHABET) for _ in range(4))
        summary = sketch(text)
        docs.append((f"d{i}", content_hash(text), Features(rng.getrandbits(64), [], summary, band_keys(summary))))
    layout, seen_at = BandLayout.from_config(DedupConfig()), datetime.now(timezone.utc)
    install(es_client, index, layout)
    es_client.bulk(operations=bulk_body(index, layout, docs, seen_at), refresh=True)  # type: ignore[arg-type]
    drive(es_client, fill(index, CandidateKeys(layout)))
    es_client.indices.refresh(index=registry_name(index))
    filled = {hit["_id"]: hit["_source"] for hit in helpers.scan(es_client, index=registry_name(index), size=2000)}

    owners = KeyOwners(CandidateKeys(layout))
    for _, digest, features in docs:
        owners.add(digest, features)
    loaded = dict(owners.documents(_stamp_at(seen_at.isoformat(timespec="milliseconds"))))

    assert sum(len(source[OWNERS]) > MAX_POSTINGS for source in filled.values()) >= 10  # the page rule is used
    assert loaded == filled
