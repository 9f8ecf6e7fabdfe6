"""Fault injection against real processes and real Elasticsearch nodes: nothing lost, failures loud.

Every test drives the public entry points as an operator would (``zhdedup es …`` and ``scrapy
runspider`` as subprocesses) and injects an ordinary fault: the node SIGKILLed and restarted
(on a dedicated node, tests/support/fault_node.py), the index write-blocked, an unwritable dead-letter
location, a full disk under the checkpoints, two writers on one input, ``es ingest`` itself
SIGKILLed, credentials in the URL, an item type that cannot take the annotations.  Each checks
that no document is lost (every input id ends up stored exactly once, directly or through
``zhdedup es replay``) and, where the semantics allow, that the verdicts equal an uninterrupted
run on a fresh index.

Why verdicts can be compared: ingests decide in input order (one lookup batch after another, at
the default ``--concurrency``), and the corpus places every repost at least ``SPACING`` documents after its original, more than
two bulks.  A resumed ingest re-judges, in input order, whatever was not acknowledged; the only
documents it could see "too early" are those of a partly applied bulk, which cannot be copies of
the re-judged ones.  A crawl cannot be compared item for item: what failed while the node was down
is judged on replay, after the rest of the crawl, so for a dead-lettered original a later repost is
the first copy.  There only clusters without a dead-lettered member are compared.
"""

from __future__ import annotations

import random
import re
import shutil
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.support.es_runs import (
    BULK,
    CHUNK,
    RUN_TIMEOUT,
    SPACING,
    Verdicts,
    assert_nothing_lost,
    assert_pages_stored,
    bulks_answered,
    corpus,
    crawl,
    crawl_cmd,
    crawl_result,
    dead_lines,
    doc_count,
    es_settings,
    ids_of,
    ingest_args,
    replay,
    request_json,
    running,
    set_write_block,
    stored,
    wait_for,
    zhdedup,
    zhdedup_cmd,
)
from tests.support.fault_node import FaultNode, free_port
from tests.support.helpers import on_a_small_disk, write_jsonl
from tests.support.zhtexts import articles

pytestmark = [pytest.mark.es, pytest.mark.fault]

SECRET = "s3cr3t-pw-zhdedup"


# ``zhdedup ARGS`` that exits at once (status 137, no cleanup) after its first bulk request returned.
DIE_AFTER_FIRST_BULK = """
import os, sys
from es_plugin.backend import writer
write = writer.BulkWriter.write
def dying(self, actions, refresh=None):
    result = yield from write(self, actions, refresh)
    os._exit(137)
writer.BulkWriter.write = dying
from scrapy_zhdedup.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


# ``zhdedup ARGS`` that SIGKILLs itself once its AFTER-th bulk request to the documents' index ("docs": the
# documents written, their keys not yet claimed) or to the key registry ("keys": claims partly made) returned.
KILL_AFTER_BULK = """
import os, signal, sys
from es_plugin.backend import writer
kind, after = sys.argv[1], int(sys.argv[2])
write, seen = writer.BulkWriter.write, [0]
def dying(self, actions, refresh=None):
    result = yield from write(self, actions, refresh)
    if self.index.endswith("-keys") == (kind == "keys"):
        seen[0] += 1
        if seen[0] == after:
            os.kill(os.getpid(), signal.SIGKILL)
    return result
writer.BulkWriter.write = dying
from scrapy_zhdedup.cli.main import main
sys.exit(main(sys.argv[3:]))
"""


# --- (a) the node SIGKILLed and restarted during `zhdedup es ingest` ---------------------------------------


def test_ingest_through_a_node_crash_loses_nothing(fault_node: FaultNode, reference: Verdicts,
                                                   tmp_path: Path) -> None:
    url, index = fault_node.url, f"fault-ingest-{uuid.uuid4().hex[:8]}"
    src = write_jsonl(tmp_path / "corpus.jsonl", corpus())
    dead = tmp_path / "dead.jsonl"
    args = ingest_args(url, index, src, tmp_path, dead)
    with running(zhdedup_cmd(*args), tmp_path / "ingest.log") as proc:
        wait_for(lambda: doc_count(url, index) >= len(corpus()) // 3, proc, "a third of the corpus stored")
        fault_node.kill()
        fault_node.restart()
        proc.wait(timeout=RUN_TIMEOUT)
    out = (tmp_path / "ingest.log").read_text(encoding="utf-8")
    assert "Traceback" not in out, out[-3000:]
    if proc.returncode == 0:  # the node came back within the retries (a fast restart): all stored, no letters
        assert not dead_lines(dead), out[-3000:]
        assert_nothing_lost(url, index, reference)
        return
    # the node was down longer than the retries last: the run reported it, and recovery stores the rest
    if dead_lines(dead):  # the node may also go down between two bulks, with nothing in flight
        assert str(dead) in out, out[-3000:]

    rerun = zhdedup(*args)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    if not dead.exists():  # a lookup ran out of retries (node down, then 503 while its shard recovered): nothing
        # was in flight to dead-letter, the checkpoint stayed behind, and the rerun stored the rest
        assert_nothing_lost(url, index, reference)
        return
    replayed = replay(url, index, dead)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert_nothing_lost(url, index, reference)
    again = replay(url, index, dead)  # a second replay is a no-op
    assert again.returncode == 0, again.stdout + again.stderr
    assert_nothing_lost(url, index, reference)


def test_kill_9_of_the_ingest_at_random_moments_then_rerun_loses_nothing_and_says_the_same(
        es_url: str, index: str, reference: Verdicts, tmp_path: Path) -> None:
    """``es ingest`` itself SIGKILLed three times (mid-bulk, mid-lookup or mid-checkpoint), then run to the end."""
    src = write_jsonl(tmp_path / "corpus.jsonl", corpus())
    args = ingest_args(es_url, index, src, tmp_path)
    rng = random.Random(20261123)
    for _ in range(3):
        target = min(doc_count(es_url, index) + rng.randrange(5, len(corpus()) // 4), len(corpus()) - BULK)
        with running(zhdedup_cmd(*args), tmp_path / "ingest.log") as proc:
            wait_for(lambda at=target: doc_count(es_url, index) >= at, proc, f"{target} documents stored")
            time.sleep(rng.uniform(0, 0.2))
            proc.kill()
            proc.wait(timeout=60)
        assert proc.returncode in (-9, 0)  # 0: it had stored the rest before the kill came
    rerun = zhdedup(*args)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert not dead_lines(tmp_path / "dead.jsonl")
    assert_nothing_lost(es_url, index, reference)  # no `es reconcile`: the verdicts of one uninterrupted run


@pytest.mark.parametrize("kind", ["docs", "keys"])
def test_kill_9_between_writing_a_batch_and_claiming_its_keys_then_rerun_says_the_same(
        es_url: str, index: str, reference: Verdicts, tmp_path: Path, kind: str) -> None:
    """``es ingest`` SIGKILLed three times right after a bulk returned: of its documents (written, no key claimed
    yet) or of its claims (some keys claimed, others not).  The rerun stores what the killed run's journal holds
    and claims the keys of its originals, so every repost after them is found: the verdicts of one uninterrupted
    run, with no ``es reconcile``, and nothing lost."""
    src = write_jsonl(tmp_path / "corpus.jsonl", corpus())
    args = ingest_args(es_url, index, src, tmp_path)
    points = [random.randrange(1, 6) for _ in range(3)]  # three runs of at most 5 bulks each: 30 in all
    print(f"killed after bulks {points} of {kind}")  # shown when the test fails
    for after in points:
        killed = subprocess.run([sys.executable, "-c", KILL_AFTER_BULK, kind, str(after), *map(str, args)],
                                capture_output=True, text=True, timeout=RUN_TIMEOUT, check=False)
        assert killed.returncode == -9, killed.stdout + killed.stderr
    rerun = zhdedup(*args)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert not dead_lines(tmp_path / "dead.jsonl")
    assert_nothing_lost(es_url, index, reference)


def test_two_ingests_of_the_same_input_store_each_document_once_and_reconcile_gives_the_verdicts_of_one(
        es_url: str, index: str, reference: Verdicts, tmp_path: Path) -> None:
    """Two writers (own checkpoints and dead letters, as on two machines) racing over one input: a document the
    other stored first is a 409 on ``create``, resolved to that copy, so each is stored once.  A repost judged
    while its original, stored by the other writer, was not yet searchable is stored unique (the refresh-window
    race of README "Several crawlers on one index"); ``es reconcile`` marks it, and the verdicts are one ingest's."""
    src = write_jsonl(tmp_path / "corpus.jsonl", corpus())
    writers = [subprocess.Popen(zhdedup_cmd(*ingest_args(es_url, index, src, tmp_path / f"writer{i}")),
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT) for i in range(2)]
    outputs = [proc.communicate(timeout=RUN_TIMEOUT)[0].decode() for proc in writers]
    assert [proc.returncode for proc in writers] == [0, 0], outputs
    judged = [int(m.group(1)) for m in (re.search(r"es ingest: (\d+) judged", out) for out in outputs) if m]
    assert len(judged) == 2 and min(judged) > 0, outputs  # they ran side by side: neither found all stored
    assert not any(dead_lines(tmp_path / f"writer{i}" / "dead.jsonl") for i in range(2))
    assert set(stored(es_url, index)) == ids_of(corpus())  # each stored once (stored() fails on a second copy)
    reconciled = zhdedup("es", "reconcile", "--url", es_url, "--index", index)
    assert reconciled.returncode == 0, reconciled.stdout + reconciled.stderr
    assert_nothing_lost(es_url, index, reference)


def test_a_full_disk_under_the_checkpoints_stops_the_ingest_naming_the_file_and_a_rerun_loses_nothing(
        es_url: str, index: str, reference: Verdicts, tmp_path: Path) -> None:
    src = write_jsonl(tmp_path / "corpus.jsonl", corpus())
    disk, kept = tmp_path / "disk", tmp_path / "kept"
    args = ["es", "ingest", "--url", es_url, "--index", index, src, "--bulk-size", str(BULK),
            "--dead-letter", tmp_path / "dead.jsonl", "--checkpoint-dir"]
    # one page: the first checkpoint fits, the next is written beside it before the rename and does not
    full = subprocess.run(on_a_small_disk(zhdedup_cmd(*args, disk), disk, "4k", keep=kept), capture_output=True,
                          text=True, timeout=RUN_TIMEOUT, check=False)
    assert full.returncode == 2, full.stderr[-3000:]
    assert f"zhdedup: error: {disk}/" in full.stderr, full.stderr[-3000:]
    assert "cannot save the checkpoint (No space left on device)" in full.stderr
    assert "Traceback" not in full.stderr and not (tmp_path / "dead.jsonl").exists()
    assert 0 < doc_count(es_url, index) < len(corpus())
    rerun = zhdedup(*args, kept)  # the checkpoint the disk kept, with room
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert_nothing_lost(es_url, index, reference)


# --- (b) a Scrapy crawl through the pipeline while the node is killed and restarted --------------------------


def test_crawl_through_a_node_crash_loses_nothing(fault_node: FaultNode, site: str, reference: Verdicts,
                                                  tmp_path: Path) -> None:
    url, index = fault_node.url, f"fault-crawl-{uuid.uuid4().hex[:8]}"
    records = corpus()[: 2 * (CHUNK + SPACING)]
    urls = [f"{site}{r['id']}.html" for r in records]
    # paced so that the node is down while pages are still coming (a restart takes tens of seconds)
    settings = es_settings(url, index, tmp_path, ZHDEDUP_MODE="annotate", ZHDEDUP_ES_MAX_RETRIES=2,
                           ZHDEDUP_ES_OUTAGE_TIMEOUT=0, ZHDEDUP_ES_TIMEOUT=5, DOWNLOAD_DELAY=0.4,
                           RANDOMIZE_DOWNLOAD_DELAY=False)  # no budget: items past the retries are dead-lettered
    with running(crawl_cmd(urls, tmp_path, settings), tmp_path / "crawl.log", cwd=tmp_path) as proc:
        wait_for(lambda: doc_count(url, index) >= len(records) // 5, proc, "a fifth of the pages stored")
        fault_node.kill()
        fault_node.restart()
        proc.wait(timeout=RUN_TIMEOUT)
    log = (tmp_path / "crawl.log").read_text(encoding="utf-8")
    result = crawl_result(tmp_path, proc.returncode, log).result
    assert result is not None, log[-5000:]
    dead = tmp_path / "dead.jsonl"
    letters = dead_lines(dead)
    assert letters, f"the node was down longer than the retries: some items must be dead-lettered\n{log[-5000:]}"
    stats = result["stats"]
    assert stats.get("zhdedup/dead_letter") == len(letters), {k: v for k, v in stats.items() if "zhdedup" in k}
    assert f"zhdedup es replay {dead}" in log  # the log says how to get them back

    replayed = replay(url, index, dead)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    by_url = {f"{site}{r['id']}.html": r["id"] for r in records}
    # What was dead-lettered is judged on replay, after the rest: compare the clusters it did not touch.
    late = {by_url[line["doc_id"]] for line in letters}
    touched = late | {reference[i][1] for i in late if reference[i][1]}
    touched |= {i for i in by_url.values() if reference[i][1] in touched}
    assert_pages_stored(url, index, site, records, reference, skip=touched)


@pytest.mark.parametrize("bulk", [1000, 3], ids=["all-through", "random-moment"])
def test_a_crawl_killed_with_judged_items_unwritten_loses_none_of_them(es_url: str, index: str, site: str,
                                                                        reference: Verdicts, tmp_path: Path,
                                                                        bulk: int) -> None:
    """A crawl SIGKILLed once all 20 items are through its pipelines (each was written and its keys
    claimed before its verdict: nothing is left to a journal), or at a random moment with bulks of 3
    (a batch judged and journaled, maybe not written yet). Then a crawl of the pages it did not finish,
    as the next run of an incremental crawl (it will not fetch the others again): that crawl first
    stores what the killed one's journal kept, if anything, and every page ends stored once with the
    verdict of one uninterrupted crawl."""
    records = corpus()[:40]
    urls = [f"{site}{r['id']}.html" for r in records]
    settings = es_settings(es_url, index, tmp_path, ZHDEDUP_MODE="annotate", ZHDEDUP_ES_BULK_SIZE=bulk,
                           ZHDEDUP_ES_FLUSH_INTERVAL=3600, LOG_LEVEL="DEBUG")
    killed = tmp_path / "killed"
    killed.mkdir()
    log = killed / "crawl.log"

    def scraped() -> int:
        return log.read_text(encoding="utf-8", errors="replace").count("Scraped from")

    rng = random.Random(f"{bulk}:{uuid.uuid4()}")
    target = 20 if bulk == 1000 else rng.randrange(5, 19)
    with socket.create_server(("127.0.0.1", 0)) as silent:  # a page that never comes keeps the crawl open
        hang = f"http://127.0.0.1:{silent.getsockname()[1]}/next.html"
        with running(crawl_cmd([*urls[:20], hang], killed, settings), log, cwd=killed) as proc:
            wait_for(lambda: scraped() >= target, proc, f"{target} items through the pipelines")
            if bulk != 1000:
                time.sleep(rng.uniform(0, 0.3))
            proc.kill()
            proc.wait(timeout=RUN_TIMEOUT)
    done_before = scraped()
    journaled = bool(list(tmp_path.glob(".zhdedup-pending-*.jsonl")))
    if bulk == 1000:
        request_json("POST", f"{es_url}/{index}/_refresh")
        assert doc_count(es_url, index) == 20 and not journaled  # every item delivered was stored before

    done = crawl(urls[done_before:], tmp_path / "next", settings)
    assert done.returncode == 0 and done.result is not None, done.log[-3000:]
    assert ("that stopped before storing them" in done.log) == journaled
    assert_pages_stored(es_url, index, site, records, reference)
    assert not list(tmp_path.glob(".zhdedup-pending-*"))  # taken over, and the second crawl's own is gone


def test_a_full_disk_under_the_journal_warns_and_every_item_is_stored(es_url: str, index: str, site: str,
                                                                       reference: Verdicts, tmp_path: Path) -> None:
    """The journal (beside the dead-letter file) on a 16 KiB disk: it is given up with one warning and
    the crawl stores every item as usual."""
    records = corpus()[:20]
    urls = [f"{site}{r['id']}.html" for r in records]
    disk = tmp_path / "disk"
    settings = es_settings(es_url, index, tmp_path, ZHDEDUP_MODE="annotate", ZHDEDUP_ES_DEAD_LETTER=disk / "dead.jsonl")
    proc = subprocess.run(on_a_small_disk(crawl_cmd(urls, tmp_path, settings), disk, "16k"), capture_output=True,
                          text=True, timeout=RUN_TIMEOUT, check=False, cwd=tmp_path)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-3000:]
    assert log.count("cannot keep the journal of buffered documents") == 1 and "No space left on device" in log
    assert_pages_stored(es_url, index, site, records, reference)


def test_crawl_with_the_node_down_from_the_start_fails_at_open(site: str, tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    urls = [f"{site}{r['id']}.html" for r in corpus()[:5]]
    done = crawl(urls, tmp_path, es_settings(url, "fault-down", tmp_path))
    assert done.result is not None and done.result["reason"] == "zhdedup_cannot_start", done.log[-3000:]
    assert "Traceback" not in done.log and "Task exception" not in done.log, done.log[-3000:]  # one line
    assert f"Elasticsearch at {url} is not reachable" in done.log
    assert "--es-url" not in done.log
    assert "Error processing" not in done.log  # not item by item
    assert not (tmp_path / "dead.jsonl").exists()  # nothing was accepted, so nothing to dead-letter
    if done.result is not None:
        stats = done.result["stats"]
        assert done.result["scraped"] == [] and "zhdedup/judged" not in stats
        assert stats.get("downloader/response_count", 0) == 0  # closed at open, before crawling


# --- (c) an unwritable dead-letter location ------------------------------------------------------------------


def unwritable(tmp_path: Path) -> Path:
    """A dead-letter path under a regular file: not creatable, for root too."""
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where a directory should be\n")
    return blocker / "dead.jsonl"


def test_ingest_with_an_unwritable_dead_letter_fails_at_start(es_url: str, index: str, reference: Verdicts,
                                                              tmp_path: Path) -> None:
    records = corpus()[:60]
    src = write_jsonl(tmp_path / "corpus.jsonl", records)
    dead = unwritable(tmp_path)
    assert zhdedup("es", "install", "--url", es_url, "--index", index).returncode == 0
    set_write_block(es_url, index, True)  # every bulk would need the dead-letter file
    try:
        proc = zhdedup(*ingest_args(es_url, index, src, tmp_path, dead), timeout=120)  # must not hang
    finally:
        set_write_block(es_url, index, False)
    assert proc.returncode != 0
    assert str(dead) in proc.stderr and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert doc_count(es_url, index) == 0
    rerun = zhdedup(*ingest_args(es_url, index, src, tmp_path))  # nothing was checkpointed as done
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert_nothing_lost(es_url, index, reference, records)


def test_dead_letter_location_lost_mid_ingest_fails_loudly(es_url: str, index: str, reference: Verdicts,
                                                           tmp_path: Path) -> None:
    """The writer must not die silently: flush/close raise naming the path instead of hanging."""
    src = write_jsonl(tmp_path / "corpus.jsonl", corpus())
    letters_dir = tmp_path / "letters"
    letters_dir.mkdir()
    dead = letters_dir / "dead.jsonl"
    try:
        with running(zhdedup_cmd(*ingest_args(es_url, index, src, tmp_path, dead)), tmp_path / "ingest.log") as proc:
            wait_for(lambda: doc_count(es_url, index) >= len(corpus()) // 4, proc, "a quarter of the corpus stored")
            shutil.rmtree(letters_dir)
            letters_dir.write_text("the dead-letter directory is gone\n")
            set_write_block(es_url, index, True)
            proc.wait(timeout=300)  # the retries take seconds; a hang takes forever
    finally:
        set_write_block(es_url, index, False)
    out = (tmp_path / "ingest.log").read_text(encoding="utf-8")
    assert proc.returncode != 0, out[-3000:]
    assert str(dead) in out and "Traceback" not in out, out[-3000:]
    letters_dir.unlink()
    letters_dir.mkdir()
    rerun = zhdedup(*ingest_args(es_url, index, src, tmp_path, dead))
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert not dead_lines(dead)
    assert_nothing_lost(es_url, index, reference)


def test_dead_letter_location_lost_mid_crawl_closes_the_spider_and_passes_every_item_on(
        es_url: str, index: str, site: str, tmp_path: Path) -> None:
    """Documents the node refuses can go nowhere: the spider closes once, naming the file, and the items
    still coming leave the pipeline unjudged rather than vanishing from the crawl's output."""
    urls = [f"{site}{r['id']}.html" for r in corpus()]
    letters_dir = tmp_path / "letters"
    letters_dir.mkdir()
    dead = letters_dir / "dead.jsonl"
    settings = es_settings(es_url, index, tmp_path, ZHDEDUP_MODE="annotate", ZHDEDUP_ES_DEAD_LETTER=dead,
                           ZHDEDUP_ES_MAX_RETRIES=1)
    try:
        with running(crawl_cmd(urls, tmp_path, settings), tmp_path / "crawl.log", cwd=tmp_path) as proc:
            wait_for(lambda: doc_count(es_url, index) >= len(urls) // 5, proc, "a fifth of the pages stored")
            shutil.rmtree(letters_dir)
            letters_dir.write_text("the dead-letter directory is gone\n")
            set_write_block(es_url, index, True)
            proc.wait(timeout=RUN_TIMEOUT)
    finally:
        set_write_block(es_url, index, False)
    log = (tmp_path / "crawl.log").read_text(encoding="utf-8")
    result = crawl_result(tmp_path, proc.returncode, log).result
    assert result is not None, log[-5000:]
    stats = result["stats"]
    assert result["reason"] == "zhdedup_store_failed", log[-5000:]
    assert str(dead) in log and "Error processing" not in log, log[-5000:]
    assert stats["zhdedup/skipped/store_failed"] >= 1
    fetched = urls[: stats["response_received_count"]]  # one page at a time, in order; judged in overlapping batches
    assert sorted(result["scraped"]) == sorted(fetched)  # every page fetched left the pipelines


def test_crawl_with_an_unwritable_dead_letter_fails_at_open(es_url: str, index: str, site: str,
                                                            tmp_path: Path) -> None:
    dead = unwritable(tmp_path)
    urls = [f"{site}{r['id']}.html" for r in corpus()[:5]]
    done = crawl(urls, tmp_path / "crawl", es_settings(es_url, index, tmp_path, ZHDEDUP_ES_DEAD_LETTER=dead))
    assert done.result is not None and done.result["reason"] == "zhdedup_cannot_start", done.log[-3000:]
    assert "Traceback" not in done.log, done.log[-3000:]
    assert str(dead) in done.log and "Error processing" not in done.log, done.log[-3000:]
    assert doc_count(es_url, index) == 0


# --- (d) the index write-blocked mid-ingest --------------------------------------------------------------------


def test_write_block_mid_ingest_dead_letters_then_replay_stores(es_url: str, index: str, reference: Verdicts,
                                                                tmp_path: Path) -> None:
    src = write_jsonl(tmp_path / "corpus.jsonl", corpus())
    dead = tmp_path / "dead.jsonl"
    args = ingest_args(es_url, index, src, tmp_path, dead)
    try:
        with running(zhdedup_cmd(*args), tmp_path / "ingest.log") as proc:
            wait_for(lambda: doc_count(es_url, index) >= len(corpus()) // 4, proc, "a quarter of the corpus stored")
            set_write_block(es_url, index, True)
            proc.wait(timeout=RUN_TIMEOUT)
    finally:
        set_write_block(es_url, index, False)
    out = (tmp_path / "ingest.log").read_text(encoding="utf-8")
    letters = dead_lines(dead)
    assert proc.returncode != 0 and letters, out[-3000:]
    assert any(line["status"] == 403 and "cluster_block_exception" in line["reason"] for line in letters)
    assert f"{len(letters)} documents" in out and str(dead) in out, out[-3000:]  # the count, and where

    # a replay that dies after its first bulk, with no chance to rewrite the file (as kill -9 would)
    stopped = subprocess.run([sys.executable, "-c", DIE_AFTER_FIRST_BULK, "es", "replay", str(dead), "--url", es_url,
                              "--index", index, "--bulk-size", "1"], capture_output=True, text=True, timeout=RUN_TIMEOUT)
    assert stopped.returncode == 137, stopped.stdout + stopped.stderr
    assert len(dead_lines(dead)) == len(letters)  # every line kept, the stored one too
    # what its first bulk stored: a letter's document, or (when the first letter is a fix of a stored copy) none
    stored_by_dead = {line["doc_id"] for line in letters} & set(stored(es_url, index))
    replayed = replay(es_url, index, dead)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    already = re.search(r"(\d+) already stored", replayed.stdout + replayed.stderr)
    assert already and int(already[1]) >= len(stored_by_dead) and not dead_lines(dead), (  # skipped, not stored twice
        stored_by_dead, [(line["op"], line["doc_id"]) for line in letters[:3]], replayed.stdout + replayed.stderr)
    rerun = zhdedup(*args)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert_nothing_lost(es_url, index, reference)


def test_short_write_block_is_retried_without_dead_letters(es_url: str, index: str, reference: Verdicts,
                                                           tmp_path: Path) -> None:
    src = write_jsonl(tmp_path / "corpus.jsonl", corpus())
    dead = tmp_path / "dead.jsonl"
    try:
        with running(zhdedup_cmd(*ingest_args(es_url, index, src, tmp_path, dead)), tmp_path / "ingest.log") as proc:
            wait_for(lambda: doc_count(es_url, index) >= BULK, proc, "the first bulk stored")
            set_write_block(es_url, index, True)
            answered = bulks_answered(es_url)  # a bulk answered from now on is refused (403, retried)...
            wait_for(lambda: bulks_answered(es_url) > answered, proc, "bulk refused by the block")
            set_write_block(es_url, index, False)  # ... and the block lifted at once: its retry is taken
            proc.wait(timeout=RUN_TIMEOUT)
    finally:
        set_write_block(es_url, index, False)
    assert proc.returncode == 0, (tmp_path / "ingest.log").read_text(encoding="utf-8")[-3000:]
    assert not dead_lines(dead)
    assert_nothing_lost(es_url, index, reference)


def test_a_document_too_large_for_the_node_is_dead_lettered_alone(es_url: str, index: str, tmp_path: Path) -> None:
    """A document over the node's request limit (http.max_content_length, 100 MB) is refused with 413: it
    alone goes to the dead-letter file, the documents that would have shared its bulk are stored."""
    records = [{"id": f"doc-{i}", "text": a.text} for i, a in enumerate(articles(12))]
    records.insert(5, {"id": "too-large", "text": "一份附有原始数据的公告。" * 20, "payload": "x" * (101 << 20)})
    src = write_jsonl(tmp_path / "corpus.jsonl", records)
    dead = tmp_path / "dead.jsonl"
    run = zhdedup("es", "ingest", "--url", es_url, "--index", index, src, "--checkpoint-dir", tmp_path / "checkpoints",
                  "--dead-letter", dead)
    assert run.returncode == 1, run.stderr[-3000:]
    letters = dead_lines(dead)
    assert [(line["doc_id"], line["status"]) for line in letters] == [("too-large", 413)]
    assert "http.max_content_length" in letters[0]["reason"]
    assert len(letters[0]["document"]["payload"]) == 101 << 20  # kept whole, for a replay once the limit is raised
    assert set(stored(es_url, index)) == {r["id"] for r in records} - {"too-large"}


# --- (e) credentials in the URL are never printed -----------------------------------------------------------------


def _files_text(root: Path) -> str:
    return "\n".join(p.read_text(encoding="utf-8", errors="replace") for p in root.rglob("*") if p.is_file())


def with_credentials(url: str) -> str:
    return url.replace("http://", f"http://zhuser:{SECRET}@", 1)


def test_credentials_in_the_url_are_never_printed(es_url: str, index: str, site: str, tmp_path: Path) -> None:
    records = corpus()[:10]
    src = write_jsonl(tmp_path / "corpus.jsonl", records)
    down = f"http://127.0.0.1:{free_port()}"
    outputs = []
    for url in (es_url, down):  # a node that ignores (or refuses) the credentials, and none at all
        secret_url = with_credentials(url)
        for args in (ingest_args(secret_url, index, src, tmp_path), ["es", "status", "--url", secret_url,
                                                                     "--index", index]):
            proc = zhdedup(*args, timeout=120)
            outputs.append(proc.stdout + proc.stderr)
        work = tmp_path / f"crawl-{len(outputs)}"
        done = crawl([f"{site}{r['id']}.html" for r in records], work,
                     es_settings(secret_url, index, work, LOG_FILE=work / "scrapy.log"))
        outputs.append(done.log + (work / "scrapy.log").read_text(encoding="utf-8"))
    assert f"Elasticsearch at {down} is not reachable" in outputs[-1]  # the messages name the node...
    for text in [*outputs, _files_text(tmp_path)]:
        assert SECRET not in text, text[text.find(SECRET) - 300 : text.find(SECRET) + 100]  # ...never the password


# --- (f) annotate mode with an item type that cannot take the annotations ------------------------------------------


@pytest.mark.parametrize("backend", ["embedded", "elasticsearch"])
def test_item_without_annotation_fields_is_refused_and_not_remembered(backend: str, es_url: str, index: str,
                                                                      site: str, tmp_path: Path) -> None:
    urls = [f"{site}{r['id']}.html" for r in corpus()[:8]]  # eight different articles
    # the store only: a JOBDIR would also resume the refused run's queued requests
    store = {"ZHDEDUP_STORE_DIR": tmp_path / "store"} if backend == "embedded" else es_settings(es_url, index, tmp_path)
    first = crawl(urls, tmp_path / "annotate", {**store, "ZHDEDUP_MODE": "annotate"}, item="bare")
    message = "zhdedup cannot set 'dedup_status' on BareItem: declare the field"
    assert message in first.log, first.log[-3000:]
    assert first.log.count(message) <= 2, "refused once, at open or at the first item, not item by item"
    assert first.returncode != 0 or (first.result is not None and first.result["reason"] != "finished")
    assert first.result is None or first.result["scraped"] == []  # nothing passed through unannotated

    second = crawl(urls, tmp_path / "drop", {**store, "ZHDEDUP_MODE": "drop"})
    assert second.returncode == 0 and second.result is not None, second.log[-3000:]
    assert "item_dropped_count" not in second.result["stats"], "items of the refused run were remembered"
    assert sorted(second.result["scraped"]) == sorted(urls)
