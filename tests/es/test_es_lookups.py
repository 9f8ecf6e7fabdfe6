"""The near lookup in the key registry (lookups.py, registry.py), against the real node."""

from __future__ import annotations

from datetime import datetime, timezone

import numpy as np
import pytest
from elasticsearch import Elasticsearch

from es_plugin.backend.lookups import EsLookups
from es_plugin.backend.registry import Claimant, Registry
from es_plugin.backend.retry import RetryPolicy
from es_plugin.backend.stats import EsStats
from es_plugin.index.document import Stored
from es_plugin.index.template import install
from es_plugin.operations import drive
from scrapy_zhdedup.config import DedupConfig
from scrapy_zhdedup.index.bands import BandLayout
from scrapy_zhdedup.index.nearindex import MAX_POSTINGS, CandidateKeys, NearIndex
from scrapy_zhdedup.model import SKETCH_SIZE, Features, Match, Sketch, Verdict
from scrapy_zhdedup.similarity.fingerprinter import Fingerprinter
from scrapy_zhdedup.similarity.rule import NearRule
from tests.support.es_docs import store
from tests.support.helpers import Stats

pytestmark = pytest.mark.es

DEDUP = DedupConfig()
KEYS, RULE = CandidateKeys.from_config(DEDUP), NearRule.from_config(DEDUP)
FULL = (1 << 64) - 1


def test_a_repeat_among_rejected_candidates_is_found_as_the_embedded_index_finds_it(
        es_client: Elasticsearch, index: str) -> None:
    """Decoys hold every sketch key of the query but sketches the rule rejects; the one repeat shares a
    single key.  The registry names all of them, in one lookup (two multi-gets), and the answer is the
    embedded index's."""
    query = Fingerprinter(DEDUP).features("国务院常务会议部署近期重点工作，推动经济运行持续好转。" * 8)
    rng = np.random.default_rng(3)
    decoys = [Features(query.fingerprint ^ FULL, [], Sketch(rng.integers(0, 0xFFFF, SKETCH_SIZE, dtype=np.uint16), 500),
                       query.sketch_keys) for _ in range(25)]
    repeat = Features(query.fingerprint ^ FULL, [], query.sketch,
                      [query.sketch_keys[0], *(int(k) for k in rng.integers(0, 1 << 32, len(query.sketch_keys) - 1))])
    docs = [(f"d{i}", f) for i, f in enumerate(decoys)] + [("repeat", repeat)]
    store(es_client, index, docs)

    embedded = NearIndex(KEYS, RULE)
    for _, features in docs:
        embedded.add(features)
    hit = embedded.nearest(query)
    assert hit is not None and docs[hit.row][0] == "repeat"

    stats = Stats()
    lookups = EsLookups(index, KEYS, RULE, RetryPolicy(0), EsStats(stats))
    assert drive(es_client, lookups.near([query])) == [
        Match("repeat", "repeat", hit.distance, hit.similarity, hit.contained, hit.reason)]
    assert stats["zhdedup/es/lookups"] == 1
    assert drive(es_client, lookups.near([])) == []  # no request


def test_a_key_held_by_more_than_max_postings_originals_names_none(es_client: Elasticsearch, index: str) -> None:
    """Boilerplate: a key more than ``MAX_POSTINGS`` originals hold is skipped, in the registry as in the
    embedded index, so a repeat sharing only that key is not found by either."""
    query = Fingerprinter(DEDUP).features("国务院常务会议部署近期重点工作，推动经济运行持续好转。" * 8)
    rng = np.random.default_rng(4)
    shared = query.sketch_keys[0]

    def other_keys() -> list[int]:
        return [shared, *(int(k) for k in rng.integers(0, 1 << 32, len(query.sketch_keys) - 1))]

    docs = [(f"d{i}", Features(query.fingerprint ^ FULL, [], Sketch(rng.integers(0, 0xFFFF, SKETCH_SIZE,
                                                                             dtype=np.uint16), 500), other_keys()))
            for i in range(MAX_POSTINGS)] + [("repeat", Features(query.fingerprint, [], query.sketch, other_keys()))]
    store(es_client, index, docs)
    embedded = NearIndex(KEYS, RULE)
    for _, features in docs:
        embedded.add(features)
    lookups = EsLookups(index, KEYS, RULE, RetryPolicy(0), EsStats(Stats()))
    assert embedded.nearest(query) is None and drive(es_client, lookups.near([query])) == [None]


@pytest.mark.parametrize("simhash_bands", [False, True])
def test_simhash_band_keys_name_candidates_only_when_switched_on(
        es_client: Elasticsearch, index: str, simhash_bands: bool) -> None:
    """A stored text reachable only through a SimHash band key (1 bit away, no sketch key in common,
    the same sketch) is found when the bands are on and not otherwise, by Elasticsearch and by the
    embedded index alike."""
    config = DedupConfig(simhash_bands=simhash_bands)
    query = Fingerprinter(config).features("国务院常务会议部署近期重点工作，推动经济运行持续好转。" * 8)
    stored = Features(query.fingerprint ^ 1, [], query.sketch, [])
    install(es_client, index, BandLayout.from_config(config))
    verdict = Verdict("near", "unique", None, None, "near", "near", stored.fingerprint)
    source = Stored.of(verdict, datetime(2026, 1, 1, tzinfo=timezone.utc), features=stored).to_source(
        BandLayout.from_config(config))
    es_client.index(index=index, id="near", document=source, refresh=True)
    registry = Registry(index, CandidateKeys.from_config(config), None, RetryPolicy(0), EsStats())
    drive(es_client, registry.claim([Claimant("near", "near", stored)], judge=False))

    embedded = NearIndex(CandidateKeys.from_config(config), NearRule.from_config(config))
    embedded.add(stored)
    hit = embedded.nearest(query)
    lookups = EsLookups(index, CandidateKeys.from_config(config), NearRule.from_config(config), RetryPolicy(0), EsStats(Stats()))
    found = drive(es_client, lookups.near([query]))
    if simhash_bands:
        assert hit is not None and hit.distance == 1
        assert found == [Match("near", "near", 1, hit.similarity, hit.contained, hit.reason)]
    else:
        assert hit is None and found == [None]
