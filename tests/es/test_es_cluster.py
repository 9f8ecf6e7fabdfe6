"""A real 3-node cluster (scripts/es-cluster.sh) and an index of 3 shards with a replica: verdicts, a node's
death mid-ingest and mid-crawl, two writers on two nodes.

The client is given every node (``--url``/``ZHDEDUP_ES_URL`` with three URLs) and sends requests to each
in turn, so the node SIGKILLed is one the client is talking to (a WARNING line says its requests went to
another).  The cluster stays available (a replica of every shard, two of three masters), so nothing may
be lost, no verdict may differ from an undisturbed run and nothing may be left to replay.  The corpus and
its process helpers are tests/support/es_runs.py's: originals, then reposts of half of them more than two
bulks later, so verdicts in input order are well defined; its first 150 documents (100 originals, 50
reposts) keep the module short.

Selected with ``-m cluster``; the cluster starts once for this module (~45 s on 2 cores) and is stopped at
its end if the module started it.
"""

from __future__ import annotations

import json
import subprocess
import urllib.error
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.es_cluster import Cluster
from tests.support.es_runs import (
    BULK,
    CHUNK,
    RUN_TIMEOUT,
    SPACING,
    Verdicts,
    assert_nothing_lost,
    assert_pages_stored,
    corpus,
    crawl_cmd,
    crawl_result,
    dead_lines,
    doc_count,
    es_settings,
    ids_of,
    ingest_args,
    request_json,
    running,
    stored,
    wait_for,
    zhdedup,
    zhdedup_cmd,
)
from tests.support.helpers import serving, write_jsonl

pytestmark = [pytest.mark.es, pytest.mark.cluster]


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    c = Cluster()
    c.start()
    try:
        yield c
    finally:
        c.release()


@pytest.fixture
def healthy(cluster: Cluster) -> Cluster:
    """The cluster with all three nodes and green (a node an earlier test killed is started again)."""
    cluster.heal()
    return cluster


def drop(urls: list[str], index: str) -> None:
    """Delete the index and its template through the first node that answers (a test may have killed one)."""
    for path in (index, f"_index_template/zhdedup-{index}"):
        for url in urls:
            try:
                request_json("DELETE", f"{url}/{path}")
                break
            except urllib.error.HTTPError:
                break  # answered: never created
            except OSError:
                continue


@pytest.fixture
def index(cluster: Cluster) -> Iterator[str]:
    name = f"zhdedup-cluster-{uuid.uuid4().hex[:12]}"
    yield name
    drop(cluster.urls, name)


def install(urls: str, index: str, shards: int) -> None:
    proc = zhdedup("es", "install", "--url", urls, "--index", index, "--shards", str(shards))
    assert proc.returncode == 0, proc.stderr


def layout(url: str, index: str) -> tuple[int, int, int]:
    """Primary shards, replicas, and the nodes holding copies of them."""
    shards = request_json("GET", f"{url}/_cat/shards/{index}?format=json")
    primaries = sum(s["prirep"] == "p" for s in shards)
    return primaries, len(shards) // max(primaries, 1) - 1, len({s["node"] for s in shards})


RECORDS = corpus()[: 2 * (CHUNK + SPACING)]
WHOLE = ("--bulk-size", "1000")  # where nothing is killed: the verdicts of input order do not depend on it


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_jsonl(tmp_path_factory.mktemp("corpus") / "corpus.jsonl", RECORDS)


@pytest.fixture(scope="module")
def reference(cluster: Cluster, source: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Verdicts]:
    """Verdicts of an undisturbed ingest into a 1-shard index of the cluster; equal to ``zhdedup scan``'s."""
    work = tmp_path_factory.mktemp("reference")
    name = f"zhdedup-cluster-ref-{uuid.uuid4().hex[:12]}"
    urls = ",".join(cluster.urls)
    try:
        install(urls, name, 1)
        proc = zhdedup(*ingest_args(urls, name, source, work), *WHOLE)
        assert proc.returncode == 0, proc.stderr[-3000:]
        verdicts = stored(cluster.urls[0], name)
        assert set(verdicts) == ids_of(RECORDS)
        scan = zhdedup("scan", source, "-o", work / "scan.jsonl")
        assert scan.returncode == 0, scan.stderr
        lines = [json.loads(line) for line in (work / "scan.jsonl").read_text(encoding="utf-8").splitlines()]
        assert {r["id"]: (r["status"], r["dup_of"], r["distance"]) for r in lines} == verdicts
        statuses = [v[0] for v in verdicts.values()]
        assert min(statuses.count("exact"), statuses.count("near")) >= len(RECORDS) // 10  # real repeats
        yield verdicts
    finally:
        drop(cluster.urls, name)


def test_three_shards_with_a_replica_give_the_verdicts_of_one_shard_and_of_scan(
        healthy: Cluster, index: str, source: Path, reference: Verdicts, tmp_path: Path) -> None:
    urls = ",".join(healthy.urls)
    install(urls, index, 3)
    proc = zhdedup(*ingest_args(urls, index, source, tmp_path), *WHOLE)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert layout(healthy.urls[2], index) == (3, 1, 3)  # 3 primaries, a replica each, spread over the 3 nodes
    assert_nothing_lost(healthy.urls[2], index, reference, RECORDS)


def test_two_writers_on_two_nodes_then_reconcile_give_the_verdicts_of_one(
        healthy: Cluster, index: str, source: Path, reference: Verdicts, tmp_path: Path) -> None:
    """Each writer talks to a node of its own, racing over one input; `es reconcile` through the third
    repairs what one could not see of the other, as on one node (tests/faults/test_es_faults.py)."""
    install(",".join(healthy.urls), index, 3)
    writers = [subprocess.Popen(zhdedup_cmd(*ingest_args(healthy.urls[i], index, source, tmp_path / f"writer{i}")),
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT) for i in range(2)]
    outputs = [proc.communicate(timeout=RUN_TIMEOUT)[0].decode() for proc in writers]
    assert [proc.returncode for proc in writers] == [0, 0], outputs
    assert not any(dead_lines(tmp_path / f"writer{i}" / "dead.jsonl") for i in range(2))
    assert set(stored(healthy.urls[2], index)) == ids_of(RECORDS)  # each stored once
    reconciled = zhdedup("es", "reconcile", "--url", healthy.urls[2], "--index", index)
    assert reconciled.returncode == 0, reconciled.stdout + reconciled.stderr
    assert_nothing_lost(healthy.urls[2], index, reference, RECORDS)


def test_a_node_the_ingest_talks_to_killed_mid_run_loses_nothing(
        healthy: Cluster, index: str, source: Path, reference: Verdicts, tmp_path: Path) -> None:
    urls, survivor = ",".join(healthy.urls), healthy.urls[1]
    install(urls, index, 3)
    dead = tmp_path / "dead.jsonl"
    with running(zhdedup_cmd(*ingest_args(urls, index, source, tmp_path, dead)), tmp_path / "ingest.log") as proc:
        wait_for(lambda: doc_count(survivor, index) >= len(RECORDS) // 3, proc, "a third of the corpus stored")
        healthy.kill(1)
        proc.wait(timeout=RUN_TIMEOUT)
    log = (tmp_path / "ingest.log").read_text(encoding="utf-8")
    assert proc.returncode == 0 and "Traceback" not in log, log[-3000:]
    assert f"Elasticsearch node {healthy.urls[0]} failed a request" in log, log[-3000:]
    assert not dead_lines(dead)  # nothing to replay
    assert_nothing_lost(survivor, index, reference, RECORDS)


def test_a_node_the_crawl_talks_to_killed_mid_crawl_loses_nothing(
        healthy: Cluster, index: str, reference: Verdicts, tmp_path: Path) -> None:
    records = RECORDS
    root = tmp_path / "site"
    root.mkdir()
    for record in records:
        (root / f"{record['id']}.html").write_text(record["html"], encoding="utf-8")
    survivor = healthy.urls[2]
    install(",".join(healthy.urls), index, 3)
    with serving(root) as site:
        urls = [f"{site}{r['id']}.html" for r in records]
        settings = es_settings(",".join(healthy.urls), index, tmp_path, ZHDEDUP_MODE="annotate", DOWNLOAD_DELAY=0.02)
        assert settings["ZHDEDUP_ES_BULK_SIZE"] == BULK
        with running(crawl_cmd(urls, tmp_path, settings), tmp_path / "crawl.log", cwd=tmp_path) as proc:
            wait_for(lambda: doc_count(survivor, index) >= len(records) // 5, proc, "a fifth of the pages stored")
            healthy.kill(2)
            proc.wait(timeout=RUN_TIMEOUT)
        log = (tmp_path / "crawl.log").read_text(encoding="utf-8")
        result = crawl_result(tmp_path, proc.returncode, log).result
        assert proc.returncode == 0 and result is not None and result["reason"] == "finished", log[-5000:]
        assert f"Elasticsearch node {healthy.urls[1]} failed a request" in log, log[-5000:]
        assert "zhdedup/dead_letter" not in result["stats"] and not dead_lines(tmp_path / "dead.jsonl")
        assert not list(tmp_path.glob(".zhdedup-pending-*"))  # every journal written and gone: nothing to replay
        assert_pages_stored(survivor, index, site, records, reference)
