"""The near search's pages (lookups.py), against the real node."""

from __future__ import annotations

from datetime import datetime, timezone

import numpy as np
import pytest
from elasticsearch import Elasticsearch

from es_plugin.index.document import Stored
from es_plugin.index.template import install
from es_plugin.operations import Steps, drive
from es_plugin.store.lookups import MAX_CROWDED, SEARCH_PAGE, EsLookups
from es_plugin.store.retry import RetryPolicy
from es_plugin.store.stats import EsStats
from scrapy_zhdedup.config import DedupConfig
from scrapy_zhdedup.index.bands import BandLayout
from scrapy_zhdedup.index.nearindex import CandidateKeys, NearIndex
from scrapy_zhdedup.model import SKETCH_SIZE, Features, Match, Sketch, Verdict
from scrapy_zhdedup.similarity.fingerprinter import Fingerprinter
from scrapy_zhdedup.similarity.rule import NearRule
from tests.support.es_docs import store
from tests.support.helpers import Stats

pytestmark = pytest.mark.es

DEDUP = DedupConfig()
KEYS, RULE = CandidateKeys.from_config(DEDUP), NearRule.from_config(DEDUP)
FULL = (1 << 64) - 1


def test_a_repeat_ranked_below_a_full_first_page_of_rejected_candidates_is_found(
        es_client: Elasticsearch, index: str) -> None:
    """Decoys hold every sketch key of the query (ranked first) but sketches the rule rejects; the one
    repeat shares a single key.  It is found on a later page, as the embedded index finds it, and the
    pages double: the decoys fill the first page and part of the second, so two ranked rounds, not
    three, after the unranked search that found more candidates than a page."""
    query = Fingerprinter(DEDUP).features("国务院常务会议部署近期重点工作，推动经济运行持续好转。" * 8)
    rng = np.random.default_rng(3)
    decoys = [Features(query.fingerprint ^ FULL, [], Sketch(rng.integers(0, 0xFFFF, SKETCH_SIZE, dtype=np.uint16), 500),
                       query.sketch_keys) for _ in range(SEARCH_PAGE * 5 // 2)]
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
    assert stats["zhdedup/es/lookups"] == 3


def test_an_unranked_search_answers_as_the_ranked_one_in_one_round(
        es_client: Elasticsearch, index: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A page of candidates alike (the query's sketch, the same time seen) but for how many of its
    sketch keys they hold, stored fewest first: the rule's tie goes to the first candidate given, so
    the answer is the one the ranked search puts first.  The unranked search gives it, in one round."""
    query = Fingerprinter(DEDUP).features("国务院常务会议部署近期重点工作，推动经济运行持续好转。" * 8)
    rng = np.random.default_rng(5)
    keys = list(query.sketch_keys)
    docs = [(f"shares{n}", Features(query.fingerprint, [], query.sketch,
                                    [*keys[:n], *(int(k) for k in rng.integers(0, 1 << 32, len(keys) - n))]))
            for n in range(1, SEARCH_PAGE + 1)]
    store(es_client, index, docs)

    def answer() -> tuple[list[Match | None], int]:
        stats = Stats()
        lookups = EsLookups(index, KEYS, RULE, RetryPolicy(0), EsStats(stats))
        return drive(es_client, lookups.near([query])), stats["zhdedup/es/lookups"]

    assert answer() == ([Match(f"shares{SEARCH_PAGE}", f"shares{SEARCH_PAGE}", 0, 1.0, 1.0, "similar")], 1)
    nothing = EsLookups(index, KEYS, RULE, RetryPolicy(0), EsStats(Stats()))
    assert drive(es_client, nothing.near([])) == []  # no request: an empty _msearch is a 400

    def ranked_only(self: EsLookups, features: list[Features], answers: list[Match | None]) -> Steps:
        yield from ()
        return list(range(len(features)))

    monkeypatch.setattr(EsLookups, "_all_candidates", ranked_only)
    assert answer()[0] == [Match(f"shares{SEARCH_PAGE}", f"shares{SEARCH_PAGE}", 0, 1.0, 1.0, "similar")]


def test_the_unranked_search_is_skipped_while_most_texts_have_a_page_of_candidates_or_more(
        es_client: Elasticsearch, index: str) -> None:
    """Texts holding every key of many stored ones need the ranked search anyway: after enough of them
    the unranked search is skipped (one request a batch, not two), and tried again once the ranked
    first pages show few candidates; the answers do not depend on it."""
    crowded = Fingerprinter(DEDUP).features("国务院常务会议部署近期重点工作，推动经济运行持续好转。" * 8)
    alone = Fingerprinter(DEDUP).features("台风“海葵”今天凌晨在福建登陆，沿海多地停课停运。" * 8)
    store(es_client, index, [(f"d{i}", crowded) for i in range(2 * SEARCH_PAGE)])
    stats = Stats()
    lookups = EsLookups(index, KEYS, RULE, RetryPolicy(0), EsStats(stats))

    def requests(features: Features, answer: Match | None) -> int:
        before = stats.get("zhdedup/es/lookups", 0)
        assert drive(es_client, lookups.near([features])) == [answer]
        return stats["zhdedup/es/lookups"] - before

    repeat = Match("d0", "d0", 0, 1.0, 1.0, "similar")
    assert [requests(crowded, repeat) for _ in range(8)] == [2] * 7 + [1]  # crowded 1 - 0.9 ** 7 = 0.52 after 7
    assert [requests(alone, None) for _ in range(2)] == [1, 1]  # ranked, and seen to have no candidate
    assert lookups.crowded < MAX_CROWDED
    assert requests(crowded, repeat) == 2  # the unranked search tried again


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
