"""A real distributed crawl (issue 38): several ``scrapy crawl news_redis`` processes fed from one scrapy-redis
queue (this checkout's redis-server, scripts/redis.sh) and several ``zhdedup es ingest`` processes, all
writing one index; then writers and a cluster node killed mid-run.

The site is the example's, published 12 times (examples/site/generate.py --rounds 12: 303 pages, 132
repeats), its manifest the ground truth; examples/run_distributed.py's tally counts against it.  The kill
tests crawl a site published 6 times (153 pages): what they assert does not grow with the site, and each
kill comes at a random share of the documents the run stores, whatever its length.

* Before ``es reconcile``: what several writers miss beyond what one writer alone misses (a module
  fixture runs it) must stay within 5 % of the repeats one writer finds (support/distributed.py's
  ``MISSED_SHARE`` says what was measured).  That bound holds with the key registry; on a backend whose
  near lookup is a search it fails (writers cannot see each other's unflushed documents): the last
  assertion of each test, after everything else.
* After ``es reconcile``: no repeat left unique that one writer judging the stored documents in the same
  order finds (``zhdedup scan`` of them in reconcile's order).
* Everywhere: 0 false merges (against the manifest, by ``dup_of`` and by cluster), 0 pages lost (every
  page judged, every article stored, in annotate mode every page), no repeat of a document neither stored
  nor delivered (so no claim a killed writer left makes a later document the repeat of nothing).

The module starts redis-server once (and stops it after if it started it) and generates and serves each
site once; the crawl test on a 3-node cluster starts the cluster (marker ``cluster``).
"""

from __future__ import annotations

import contextlib
import random
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from examples.site.generate import generate
from tests.support.distributed import (
    KILL_ROUNDS,
    ROUNDS,
    RedisServer,
    Site,
    assert_few_missed,
    assert_sound,
    assert_sound_then_reconciled,
    crawl,
    ingest,
    kill_one_at_random,
    running_at,
    share_of,
)
from tests.support.es_cluster import Cluster
from tests.support.es_runs import request_json, zhdedup
from tests.support.helpers import serving

pytestmark = [pytest.mark.fault, pytest.mark.es, pytest.mark.redis]
WRITERS = (2, 4, 8)


@pytest.fixture(scope="module")
def redis_url() -> Iterator[str]:
    server = RedisServer()
    server.start()
    try:
        yield server.url
    finally:
        server.release()


def served_site(tmp_path_factory: pytest.TempPathFactory, rounds: int) -> Iterator[Site]:
    root = tmp_path_factory.mktemp("site") / "public"
    manifest = generate(root, rounds=rounds)
    with serving(root) as url:
        yield Site(manifest, root, url)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    yield from served_site(tmp_path_factory, ROUNDS)


@pytest.fixture(scope="module")
def kill_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    """The smaller site of the kill tests (``KILL_ROUNDS``)."""
    yield from served_site(tmp_path_factory, KILL_ROUNDS)


def fresh_index(es_url: str, request: pytest.FixtureRequest) -> str:
    name = f"zhdedup-test-distributed-{uuid.uuid4().hex[:12]}"
    request.addfinalizer(lambda: drop_index(es_url, name))
    proc = zhdedup("es", "install", "--url", es_url, "--index", name)
    assert proc.returncode == 0, proc.stderr
    return name


def drop_index(url: str, name: str) -> None:
    """The index, the indices named after it (``<name>-*``: a key registry) and its template."""
    base = url.split(",")[0]
    with contextlib.suppress(OSError):
        names = list(request_json("GET", f"{base}/{name},{name}-*?expand_wildcards=all&ignore_unavailable=true"))
        for path in (*names, f"_index_template/zhdedup-{name}"):
            request_json("DELETE", f"{base}/{path}")


@pytest.fixture(scope="module")
def crawl_baseline(es_url: str, redis_url: str, site: Site, tmp_path_factory: pytest.TempPathFactory,
                   request: pytest.FixtureRequest) -> int:
    """How many repeats one crawler alone misses."""
    run = crawl(1, site, es_url, fresh_index(es_url, request), redis_url, tmp_path_factory.mktemp("crawl1"))
    tally = run.tally(site)
    assert run.exit_codes == [0]
    assert_sound(tally)
    assert len(tally.missed) <= 0.05 * tally.repeats, tally.missed  # the engine finds the site's repeats
    return len(tally.missed)


@pytest.fixture(scope="module")
def ingest_baseline(es_url: str, site: Site, tmp_path_factory: pytest.TempPathFactory,
                    request: pytest.FixtureRequest) -> int:
    """How many repeats one ``es ingest`` alone misses."""
    run = ingest(1, site, es_url, fresh_index(es_url, request), tmp_path_factory.mktemp("ingest1"))
    tally = run.tally(site)
    assert run.exit_codes == [0]
    assert_sound(tally)
    assert len(tally.missed) <= 0.05 * tally.repeats, tally.missed
    return len(tally.missed)


@pytest.mark.parametrize(("crawlers", "mode"), [*((n, "drop") for n in WRITERS), (4, "annotate")])
def test_crawlers_from_one_queue_miss_no_repeat_and_lose_nothing(
        crawlers: int, mode: str, es_url: str, redis_url: str, site: Site, crawl_baseline: int,
        tmp_path: Path, request: pytest.FixtureRequest) -> None:
    index = fresh_index(es_url, request)
    run = crawl(crawlers, site, es_url, index, redis_url, tmp_path, mode)
    assert run.exit_codes == [0] * crawlers
    before = assert_sound_then_reconciled(site, run, es_url, index, tmp_path)
    assert_few_missed(before, crawl_baseline, crawlers, "crawlers")


@pytest.mark.parametrize("writers", WRITERS)
def test_ingest_writers_on_one_index_miss_no_repeat_and_lose_nothing(
        writers: int, es_url: str, site: Site, ingest_baseline: int, tmp_path: Path,
        request: pytest.FixtureRequest) -> None:
    index = fresh_index(es_url, request)
    run = ingest(writers, site, es_url, index, tmp_path)
    before = assert_sound_then_reconciled(site, run, es_url, index, tmp_path)
    assert_few_missed(before, ingest_baseline, writers, "es ingest processes")


def test_a_crawler_killed_mid_run_loses_nothing_once_the_crawl_is_run_again(
        es_url: str, redis_url: str, kill_site: Site, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """kill -9 of one of 4 crawlers at a random moment (between judging a page and storing it, or
    anywhere else), then the crawl run again as an operator would (the queue seeded again, one crawler):
    its journal and delivery ledger are taken over, the pages the dead crawler had popped are crawled
    again; nothing lost, no repeat of a document that was never stored."""
    index = fresh_index(es_url, request)
    seed = random.randrange(1 << 30)
    kill = kill_one_at_random(es_url, index, seed, kill_site.documents("drop"))
    first = crawl(4, kill_site, es_url, index, redis_url, tmp_path, during=kill)
    assert sorted(first.exit_codes) == [-9, 0, 0, 0], f"seed {seed}"
    again = crawl(1, kill_site, es_url, index, redis_url, tmp_path, fresh=False)
    assert again.exit_codes == [0]
    assert_sound_then_reconciled(kill_site, again, es_url, index, tmp_path)


def test_an_ingest_writer_killed_mid_run_loses_nothing_once_run_again(
        es_url: str, kill_site: Site, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """kill -9 of one of 4 ``es ingest`` processes at a random moment, then that command run again (its
    checkpoint resumes it): every page stored once, no repeat of a document that was never stored."""
    index = fresh_index(es_url, request)
    seed = random.randrange(1 << 30)
    run = ingest(4, kill_site, es_url, index, tmp_path,
                 during=kill_one_at_random(es_url, index, seed, kill_site.documents("annotate")))
    assert run.exit_codes == [0] * 4, f"seed {seed}"
    assert_sound_then_reconciled(kill_site, run, es_url, index, tmp_path)


@pytest.mark.cluster
def test_a_cluster_node_killed_under_four_crawlers_loses_nothing(
        redis_url: str, kill_site: Site, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """4 crawlers on a 3-node cluster (index of 3 shards with a replica), one node SIGKILLed mid-run at a
    random moment: the crawlers go on through the other two; nothing lost, no false merge."""
    cluster = Cluster()
    cluster.start()
    request.addfinalizer(cluster.release)
    urls = ",".join(cluster.urls)
    index = f"zhdedup-test-distributed-{uuid.uuid4().hex[:12]}"
    request.addfinalizer(lambda: drop_index(urls, index))
    proc = zhdedup("es", "install", "--url", urls, "--index", index, "--shards", "3")
    assert proc.returncode == 0, proc.stderr
    rng = random.Random()
    node, target = rng.randint(1, 3), share_of(rng, kill_site.documents("drop"))

    def kill_node(procs: list[subprocess.Popen[bytes]]) -> None:
        running_at(urls, index, target, procs, f"node {node}")
        cluster.kill(node)

    run = crawl(4, kill_site, urls, index, redis_url, tmp_path, during=kill_node)
    assert run.exit_codes == [0] * 4, f"node {node} killed once the index held {target} documents"
    assert_sound_then_reconciled(kill_site, run, urls, index, tmp_path)

