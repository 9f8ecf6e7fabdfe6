"""A crawl in drop mode while its Elasticsearch node goes away for half a minute (stopped cleanly, as in a
rolling restart, and started again about 25 s later), on a node of its own (tests/support/fault_node.py).

Within ``ZHDEDUP_ES_OUTAGE_TIMEOUT`` (its default) the crawl holds its items and slows down: every unique
page reaches the feed, no repeat does, nothing is dead-lettered, and the index holds first copies only.
Past a short budget the items not judged are not delivered, and not marked delivered: the command the
crawl prints at close delivers them (in drop mode), after which feed and index hold one copy of every
story, and a re-crawl delivers nothing again.

What is counted: the feed (the items that left the pipelines, and the replay's output file) against the
clusters of an uninterrupted ingest of the same pages (``reference``).  A dead-lettered original is
judged at replay, after its later reposts, so there one member of each cluster is expected, not the
first.
"""

from __future__ import annotations

import json
import re
import shlex
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest

from scrapy_zhdedup.pipelines.delivery import DeliveryLedger
from tests.support.es_runs import (
    CHUNK,
    RUN_TIMEOUT,
    SPACING,
    Verdicts,
    corpus,
    crawl,
    crawl_cmd,
    crawl_result,
    dead_lines,
    doc_count,
    es_settings,
    running,
    stored,
    wait_for,
    zhdedup,
)
from tests.support.fault_node import FaultNode

pytestmark = [pytest.mark.es, pytest.mark.fault]


AWAY_S = 25  # how long the node stays stopped before it is started again (its start takes longer)


def cluster_of(reference: Verdicts) -> dict[str, str]:
    """Each record id's story: its own id for a first copy, else the first copy it repeats."""
    return {doc_id: dup_of or doc_id for doc_id, (_, dup_of, _) in reference.items()}


def outage_crawl(node: FaultNode, site: str, tmp_path: Path, **extra: object) -> tuple[dict, str, list[str], str]:
    """A drop-mode crawl of the first two chunks with the node stopped once a fifth of the pages are stored
    and started again ``AWAY_S`` later; returns the crawl's result, its log, its urls and its index."""
    index = f"outage-{uuid.uuid4().hex[:8]}"
    records = corpus()[: 2 * (CHUNK + SPACING)]
    urls = [f"{site}{r['id']}.html" for r in records]
    settings = es_settings(node.url, index, tmp_path, ZHDEDUP_MODE="drop", ZHDEDUP_ES_TIMEOUT=5,
                           DOWNLOAD_DELAY=0.3, RANDOMIZE_DOWNLOAD_DELAY=False, **extra)
    log_path = tmp_path / "crawl.log"
    with running(crawl_cmd(urls, tmp_path, settings), log_path, cwd=tmp_path) as proc:
        wait_for(lambda: doc_count(node.url, index) >= len(records) // 5, proc, "a fifth of the pages stored")
        node.stop()
        time.sleep(AWAY_S)  # the outage itself; nothing is asserted on time
        node.restart()
        proc.wait(timeout=RUN_TIMEOUT)
    log = log_path.read_text(encoding="utf-8")
    result = crawl_result(tmp_path, proc.returncode, log).result
    assert result is not None, log[-5000:]
    return result, log, urls, index


def page_id(url: str) -> str:
    return url.rsplit("/", 1)[-1].removesuffix(".html")


def assert_one_copy_of_each_story(delivered: list[str], stored_ids: list[str], reference: Verdicts,
                                  urls: list[str]) -> None:
    """Every story of the crawled pages delivered once and stored once (drop mode): none lost, no repeat."""
    clusters = cluster_of(reference)
    stories = {clusters[page_id(u)] for u in urls}
    fed = Counter(clusters[page_id(u)] for u in delivered)
    assert not [u for u, n in Counter(delivered).items() if n > 1], "an item delivered twice"
    assert set(fed) == stories, f"stories lost: {sorted(stories - set(fed))[:10]}"
    assert not [s for s, n in fed.items() if n > 1], f"repeats delivered: {[s for s, n in fed.items() if n > 1]}"
    kept = Counter(clusters[page_id(u)] for u in stored_ids)
    assert set(kept) == stories and max(kept.values()) == 1, f"repeats stored: {[s for s, n in kept.items() if n > 1]}"


def test_a_crawl_rides_out_a_node_restart_and_loses_nothing(fault_node: FaultNode, site: str, reference: Verdicts,
                                                            tmp_path: Path) -> None:
    """Today each item whose lookups fail for ~10 s is dropped ("not judged now") and dead-lettered."""
    result, log, urls, index = outage_crawl(fault_node, site, tmp_path)
    stats = result["stats"]
    firsts = [u for u in urls if reference[page_id(u)][0] == "unique"]
    assert not (tmp_path / "dead.jsonl").exists() or not dead_lines(tmp_path / "dead.jsonl"), log[-5000:]
    assert sorted(result["scraped"]) == sorted(firsts), f"lost: {sorted(set(firsts) - set(result['scraped']))}"
    assert_one_copy_of_each_story(result["scraped"], list(stored(fault_node.url, index)), reference, urls)
    assert stats.get("zhdedup/dropped/exact", 0) + stats.get("zhdedup/dropped/near", 0) == len(urls) - len(firsts)
    assert "zhdedup/not_delivered" not in stats and "not delivered now" not in log
    away = [line for line in log.splitlines() if "does not answer (" in line]
    back = [line for line in log.splitlines() if "answers again after" in line]
    assert len(away) == 1 and len(back) == 1, "\n".join(away + back)  # one line each way, not one per request
    assert "nothing was given up" in back[0], back[0]
    assert all(re.search(r"\(no HTTP status|\(HTTP \d{3}", line) for line in away), away
    assert "{'error'" not in log and '{"error"' not in log  # no raw error bodies


def test_past_the_outage_budget_the_printed_command_delivers_what_the_crawl_did_not(
        fault_node: FaultNode, site: str, reference: Verdicts, tmp_path: Path) -> None:
    """Today the items not judged are dropped *and marked delivered*: the printed replay (annotate mode)
    stores repeats in the drop-mode index, and a re-crawl drops the replayed ones as delivered earlier."""
    result, log, urls, index = outage_crawl(fault_node, site, tmp_path, ZHDEDUP_ES_OUTAGE_TIMEOUT=2,
                                            ZHDEDUP_ES_MAX_RETRIES=1)
    dead = tmp_path / "dead.jsonl"
    held = {line["doc_id"] for line in dead_lines(dead) if line["stage"] == "lookup"}
    assert held, f"the node was away longer than the budget: some items are held back\n{log[-5000:]}"
    assert not held & set(result["scraped"]), "an item not judged was delivered as judged"
    ledger = DeliveryLedger(tmp_path, index)  # beside the dead-letter file, as the crawl kept it
    ledger.open()
    ledger.close()
    assert held <= ledger.undelivered, f"reported delivered, never delivered: {sorted(held - ledger.undelivered)[:5]}"
    assert result["stats"].get("zhdedup/not_delivered") == len(held)
    printed = re.findall(r"judge and store them with: (zhdedup es replay [^;\n]+)", log)
    assert len(printed) == 1, log[-5000:]
    args = shlex.split(printed[0])[1:]
    assert args[args.index("--mode") + 1] == "drop"
    output = Path(args[args.index("--output") + 1])

    replayed = zhdedup(*args)
    (tmp_path / "replay.log").write_text(replayed.stdout + replayed.stderr, encoding="utf-8")  # for a look
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    recovered = [json.loads(line)["url"] for line in output.read_text(encoding="utf-8").splitlines()]
    assert set(recovered) <= held
    assert ", drop mode: " in replayed.stdout, replayed.stdout
    assert f"{len(recovered)} items delivered to {output}" in replayed.stdout, replayed.stdout
    assert_one_copy_of_each_story(result["scraped"] + recovered, list(stored(fault_node.url, index)), reference, urls)

    # the next run of the same crawl: everything it finds was delivered by this one or by the replay
    again = crawl(urls, tmp_path / "again", es_settings(fault_node.url, index, tmp_path, ZHDEDUP_MODE="drop"))
    assert again.result is not None, again.log[-5000:]
    assert again.result["scraped"] == [], again.result["scraped"]

