"""``dedup_index`` on an existing index of real Chinese news, against the real node."""

from __future__ import annotations

import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from elasticsearch import Elasticsearch

from es_plugin.commands.dedup_index import READ_SORT, dedup_index
from es_plugin.commands.pointintime import PointInTime
from es_plugin.errors import EsIndexError
from es_plugin.flavour import server_of
from scrapy_zhdedup.cli.main import main
from scrapy_zhdedup.config import DedupConfig
from scrapy_zhdedup.deduper import Deduper
from scrapy_zhdedup.errors import LayoutMismatchError, ZhDedupError
from scrapy_zhdedup.index.bands import BandLayout
from tests.support.es_runs import bulks_in_flight
from tests.support.helpers import Interrupt, interrupt_after
from tests.support.waiting import wait_until
from tests.support.zhtexts import articles, edit_chars, traditional, with_attribution

pytestmark = pytest.mark.es

DEDUP = DedupConfig()
VERDICT = ("status", "dup_of", "distance", "cluster", "hash", "fp", "doc_id")


def corpus(n: int = 30) -> list[tuple[str, dict[str, Any]]]:
    """Originals with reposts (attribution lines, typos, traditional, whitespace-only copies), and two bad docs."""
    docs: list[tuple[str, dict[str, Any]]] = []
    rng = random.Random(7)
    for i, a in enumerate(articles(n)):
        docs.append((f"a{i}", {"title": a.title, "text": a.text}))
        kinds = rng.sample(["attr", "edit", "trad", "copy"], k=rng.randint(0, 2))
        for kind in kinds:
            text = {"attr": lambda t: with_attribution(t), "edit": lambda t, i=i: edit_chars(t, 2, i),
                    "trad": traditional, "copy": lambda t: " " + t.replace("。", "。\n")}[kind](a.text)
            docs.append((f"{kind}{i}", {"title": a.title, "text": text}))
    rng.shuffle(docs)  # reposts may come before their original, as in a real corpus
    docs.insert(5, ("empty", {"title": "空", "text": " 。，！ "}))
    docs.insert(9, ("notext", {"title": "没有正文"}))
    return docs


def load(client: Elasticsearch, index: str, docs: list[tuple[str, dict[str, Any]]], shards: int = 1) -> None:
    client.indices.create(index=index, settings={"number_of_shards": shards, "number_of_replicas": 0},
                          mappings={"_meta": {"owner": "test"},
                                    "properties": {"title": {"type": "text"}, "text": {"type": "text"}}})
    ops: list[dict[str, Any]] = []
    for doc_id, source in docs:
        ops += [{"index": {"_index": index, "_id": doc_id}}, source]
    assert not client.bulk(operations=ops, refresh=True)["errors"]


def verdicts(client: Elasticsearch, index: str) -> dict[str, dict[str, Any]]:
    client.indices.refresh(index=index)
    hits = client.search(index=index, size=1000, query={"match_all": {}})["hits"]["hits"]
    return {h["_id"]: {k: h["_source"].get("zhdedup", {}).get(k) for k in VERDICT} for h in hits}


@pytest.fixture(scope="module")
def docs() -> list[tuple[str, dict[str, Any]]]:
    return corpus()


@pytest.mark.parametrize("workers", [1, 2])
def test_verdicts_equal_the_engine_in_read_order(es_client: Elasticsearch, index: str,
                                                 docs: list[tuple[str, dict[str, Any]]], tmp_path: Path,
                                                 workers: int) -> None:
    """The engine's verdicts in read order, whether 1 or 2 worker processes prepare the documents."""
    load(es_client, index, docs)
    report = dedup_index(es_client, index, DEDUP, checkpoint=tmp_path / "ck.json", batch_size=16, workers=workers)

    deduper, expected = Deduper(DEDUP), {}
    for doc_id, source in docs:  # insertion order is _seq_no order on one shard
        if doc_id not in ("empty", "notext"):
            v = deduper.judge(doc_id, text=source["text"])
            expected[doc_id] = (v.status, v.dup_of, v.distance, v.cluster)
    got = verdicts(es_client, index)
    assert {d: (g["status"], g["dup_of"], g["distance"], g["cluster"]) for d, g in got.items() if g["status"]} == expected
    assert got["empty"]["status"] is None and got["notext"]["status"] is None
    assert report["skipped"] == 2 and set(report["skipped_examples"]) == {"empty", "notext"}
    statuses = [e[0] for e in expected.values()]
    assert report["judged"] == len(expected) and report["near"] == statuses.count("near") > 5
    assert report["exact"] == statuses.count("exact") > 3
    biggest = report["largest"][0]
    assert biggest["size"] == max(sum(1 for e in expected.values() if e[3] == c) for c in {e[3] for e in expected.values()})
    assert biggest["examples"][0] == biggest["cluster"]
    # the index keeps its own _meta next to ours, and a second run has nothing left to do
    meta = es_client.indices.get_mapping(index=index)[index]["mappings"]["_meta"]
    assert meta["owner"] == "test" and meta["zhdedup"]["layout"] == BandLayout.from_config(DEDUP).to_dict()
    again = dedup_index(es_client, index, DEDUP, checkpoint=tmp_path / "ck.json")
    assert again["judged"] == 0 and again["loaded"] == len(expected)


def test_interrupted_runs_resume_to_the_uninterrupted_result(es_client: Elasticsearch, index: str,
                                                              docs: list[tuple[str, dict[str, Any]]],
                                                              tmp_path: Path) -> None:
    straight, resumed = index, f"{index}-resumed"
    load(es_client, straight, docs)
    load(es_client, resumed, docs)
    dedup_index(es_client, straight, DEDUP, batch_size=10)

    checkpoint, seen = tmp_path / "ck.json", []
    with pytest.raises(Interrupt):  # stops mid-page: the judged part of the page is written anyway
        dedup_index(es_client, resumed, DEDUP, checkpoint=checkpoint, batch_size=10, progress=interrupt_after(17, seen))
    first = sum(1 for v in verdicts(es_client, resumed).values() if v["status"])
    assert first == 17 - sum(1 for d, _ in docs[:17] if d in ("empty", "notext"))
    with pytest.raises(Interrupt):
        dedup_index(es_client, resumed, DEDUP, checkpoint=checkpoint, batch_size=10, progress=interrupt_after(40, seen))
    last = dedup_index(es_client, resumed, DEDUP, checkpoint=checkpoint, batch_size=10, progress=lambda k: seen.append(k))

    assert len(seen) == len(docs)  # every document judged exactly once over the three runs
    assert last["loaded"] == 40 - 2 and last["skipped"] == 2
    assert verdicts(es_client, resumed) == verdicts(es_client, straight)


def test_kill_9_at_random_moments_then_rerun_gives_the_uninterrupted_result(
        es_url: str, es_client: Elasticsearch, index: str, tmp_path: Path) -> None:
    """``zhdedup es dedup-index`` SIGKILLed three times (mid-page, mid-bulk or mid-checkpoint), then run to the end."""
    docs = corpus(100)
    straight, resumed = index, f"{index}-resumed"
    load(es_client, straight, docs)
    load(es_client, resumed, docs)
    dedup_index(es_client, straight, DEDUP, batch_size=10)
    cmd = [sys.executable, "-m", "scrapy_zhdedup.cli", "es", "dedup-index", "--url", es_url, "--index", resumed,
           "--checkpoint", str(tmp_path / "ck.json"), "--batch-size", "10", "--workers", "2"]
    judged = {"query": {"exists": {"field": "zhdedup.status"}}}
    rng = random.Random(20261123)
    for _ in range(3):
        target = min(es_client.count(index=resumed, body=judged)["count"] + rng.randrange(5, 40), len(docs) - 20)
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_until(lambda at=target: es_client.count(index=resumed, body=judged)["count"] >= at,
                       f"{target} verdicts written", 600, proc=proc)
            time.sleep(rng.uniform(0, 0.2))  # then killed at a random moment: the scenario
        finally:
            proc.kill()
            proc.wait(timeout=60)
    last = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    assert last.returncode == 0, last.stdout + last.stderr
    assert verdicts(es_client, resumed) == verdicts(es_client, straight)


@pytest.mark.parametrize("second_after", [0, 60])
def test_two_runs_side_by_side_give_the_result_of_one(es_url: str, es_client: Elasticsearch, index: str,
                                                       tmp_path: Path, second_after: int) -> None:
    """Two ``zhdedup es dedup-index`` processes on one index, each with its own checkpoint (as on two
    machines), the second started at once or once the first has written ``second_after`` verdicts
    (it then loads those and judges the rest beside the first): both end well, and the index holds
    the verdicts of one run.  Each is paused (SIGSTOP) while the other writes, so that both judge a
    part however fast the machine (one run could otherwise end before the other has started).  Only where a
    run reads one frozen view (a point in time): on a server without one, a run's load of what was judged and
    its walk of the rest see the index at different moments (README, compatibility)."""
    if not server_of(es_client).point_in_time:
        pytest.skip(f"{server_of(es_client)} has no point in time: runs side by side are not one run there")
    docs = corpus(300)  # ~600 documents
    straight, shared = index, f"{index}-shared"
    load(es_client, straight, docs)
    load(es_client, shared, docs)
    dedup_index(es_client, straight, DEDUP, batch_size=10)
    judged = {"query": {"exists": {"field": "zhdedup.status"}}}

    def count() -> int:
        es_client.indices.refresh(index=shared)
        return int(es_client.count(index=shared, body=judged)["count"])

    def grows_past(n: int, run: subprocess.Popen[str]) -> None:
        wait_until(lambda: count() > n, f"verdict beyond the {n} written", 600, proc=run)

    def start(i: int) -> subprocess.Popen[str]:
        return subprocess.Popen([sys.executable, "-m", "scrapy_zhdedup.cli", "es", "dedup-index", "--url", es_url,
                                 "--index", shared, "--checkpoint", str(tmp_path / f"ck{i}.json"),
                                 "--batch-size", "10", "--workers", "1"],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def paused(run: subprocess.Popen[str]) -> int:
        run.send_signal(signal.SIGSTOP)
        wait_until(lambda: not bulks_in_flight(es_url), "end of the bulks the paused run had sent")  # they land
        return count()

    first = start(0)
    if second_after:
        grows_past(second_after - 1, first)
    before = paused(first)
    second = start(1)
    grows_past(before, second)
    before = paused(second)
    first.send_signal(signal.SIGCONT)
    grows_past(before, first)
    second.send_signal(signal.SIGCONT)
    for i, run in enumerate((first, second)):
        out, _ = run.communicate(timeout=600)
        assert run.returncode == 0, out
        summary = re.search(r"dedup-index: (\d+) judged .*?, (\d+) judged before", out)
        assert summary and int(summary[1]) > 0, out  # each judged a part
        assert i == 0 or not second_after or int(summary[2]) >= second_after, out  # the second loaded the first's
    assert verdicts(es_client, shared) == verdicts(es_client, straight)


def test_dry_run_writes_nothing(es_client: Elasticsearch, index: str,
                                docs: list[tuple[str, dict[str, Any]]], tmp_path: Path) -> None:
    load(es_client, index, docs[:20])
    report = dedup_index(es_client, index, DEDUP, dry_run=True, checkpoint=tmp_path / "ck.json")
    assert report["judged"] + report["skipped"] == 20 and report["dry_run"]
    mapping = es_client.indices.get_mapping(index=index)[index]["mappings"]
    assert "zhdedup" not in mapping["properties"] and "zhdedup" not in mapping["_meta"]
    assert not (tmp_path / "ck.json").exists()
    assert all(v["status"] is None for v in verdicts(es_client, index).values())


def test_point_in_time_expiry_keeps_the_order(es_client: Elasticsearch, index: str,
                                              docs: list[tuple[str, dict[str, Any]]]) -> None:
    load(es_client, index, docs, shards=2)
    reader = PointInTime(es_client, index, refresh=True)
    body = {"query": {"match_all": {}}, "sort": READ_SORT, "size": 7, "_source": False}
    expected = [h["_id"] for page in reader.pages(body, reopen=True) for h in page]
    got = []
    for page in reader.pages(body, reopen=True):
        got += [h["_id"] for h in page]
        if len(got) == 14:  # as if it had expired: the point in time, or the scroll that stands in for one
            if reader.pit is not None:
                es_client.close_point_in_time(id=reader.pit)
            else:
                es_client.clear_scroll(scroll_id=reader.scroll)
    reader.close()
    assert got == expected and len(got) == len(docs)


def test_wrong_layout_or_mapping_is_refused(es_client: Elasticsearch, index: str,
                                            docs: list[tuple[str, dict[str, Any]]]) -> None:
    with pytest.raises(ZhDedupError, match="no such index"):
        dedup_index(es_client, index, DEDUP)
    load(es_client, index, docs[:12])
    dedup_index(es_client, index, DEDUP)
    with pytest.raises(LayoutMismatchError, match="threshold"):
        dedup_index(es_client, index, DedupConfig(threshold=4))

    other = f"{index}-conflict"
    es_client.indices.create(index=other, mappings={"properties": {"zhdedup": {"type": "keyword"}}})
    with pytest.raises(ZhDedupError, match="cannot add the zhdedup fields"):
        dedup_index(es_client, other, DEDUP)
    foreign = f"{index}-foreign"
    es_client.indices.create(index=foreign, mappings={"_meta": {"zhdedup": {"template_version": 99}}})
    with pytest.raises(EsIndexError, match="template version 99"):
        dedup_index(es_client, foreign, DEDUP)



def test_a_field_no_document_has_is_refused_and_a_checkpoint_names_what_differs(
        es_url: str, es_client: Elasticsearch, index: str, docs: list[tuple[str, dict[str, Any]]], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """``--text-field body`` on an index whose documents have ``text``: one line, exit 2, nothing written (it
    exited 0 having skipped every document, and its checkpoint refused the corrected command); a checkpoint of
    other options names the option and the way to start over (it printed both identities as dicts)."""
    load(es_client, index, docs[:12])
    checkpoint = tmp_path / "ck.json"
    command = ["es", "dedup-index", "--url", es_url, "--index", index, "--checkpoint", str(checkpoint), "--workers", "1"]
    assert main([*command, "--text-field", "body"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"zhdedup: error: {index}: no document has a field 'body' (--text-field); its documents have text, title"]
    assert not checkpoint.exists() and "zhdedup" not in es_client.indices.get_mapping(index=index)[index]["mappings"].get(
        "properties", {})
    assert main([*command, "--id-field", "url"]) == 2
    assert "no document has a field 'url' (--id-field)" in capsys.readouterr().err

    assert main(command) == 0 and checkpoint.exists()
    capsys.readouterr()
    assert main([*command, "--similarity", "0.7"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"zhdedup: error: {checkpoint}: the checkpoint of a run with other options (ZHDEDUP_SIMILARITY (--similarity) "
        "0.68, now 0.7); start over with --restart (the verdicts the index holds are kept), or pass another "
        "--checkpoint"]
    assert main([*command, "--similarity", "0.7", "--restart"]) == 0
