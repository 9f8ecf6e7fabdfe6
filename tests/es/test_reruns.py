"""A crawl run again on the same store, on both backends (a real Elasticsearch node), as real ``scrapy``
processes: ``ZHDEDUP_RERUN = "new"`` delivers only what no earlier run delivered, ``"all"`` everything
again, and a crawl SIGKILLed after judging an item but before delivering it delivers that item when it
runs again.  Every unique page is delivered exactly once over the killed run and its resumption, and
both backends count the same (issue 33, item 5: they counted 28 against 17 reruns).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from elasticsearch import Elasticsearch

from tests.support import SUPPORT
from tests.support.helpers import serving
from tests.support.zhtexts import articles, edit_chars, news_page, with_attribution

pytestmark = [pytest.mark.es]

SPIDER = SUPPORT / "fault_spider.py"
ORIGINALS = 10
KILL_AT = "o6.html"  # the 8th page: o0..o5 and r0 are judged before it (delivered, unless judged in its batch)
RERUN_STATS = ("zhdedup/judged", "zhdedup/unique", "zhdedup/rerun/delivered", "zhdedup/rerun/undelivered",
               "zhdedup/dropped/rerun")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, list[str]]]:
    """Ten articles and three repeats (an exact copy, a repost, an edited copy), served in crawl order."""
    root = tmp_path_factory.mktemp("site")
    texts = articles(ORIGINALS, max_chars=1200)
    pages = {f"o{i}.html": news_page(a.title, a.text) for i, a in enumerate(texts)}
    pages |= {"r0.html": news_page(texts[0].title, texts[0].text, site="caijing"),
              "r1.html": news_page(texts[1].title, with_attribution(texts[1].text), site="caijing"),
              "r2.html": news_page(texts[2].title, edit_chars(texts[2].text, 2, 2), site="caijing")}
    for name, body in pages.items():
        (root / name).write_text(body, encoding="utf-8")
    order = ["o0.html", "o1.html", "o2.html", "o3.html", "o4.html", "r0.html", "o5.html", "o6.html", "o7.html",
             "o8.html", "r1.html", "o9.html", "r2.html"]
    with serving(root) as base:
        yield base, [base + name for name in order]


def run(urls: list[str], work: Path, settings: dict[str, Any], kill_at: str = "") -> tuple[int, dict[str, Any]]:
    """One ``scrapy runspider`` process; its exit status and what it wrote at close (nothing if killed)."""
    (work / "urls.txt").write_text("\n".join(urls) + "\n", encoding="utf-8")
    out = work / "result.json"
    out.unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "scrapy", "runspider", str(SPIDER), "-a", f"urls={work / 'urls.txt'}",
           "-a", f"out={out}", "-a", f"delivered={work / 'delivered.txt'}", "-a", f"kill_at={kill_at}"]
    for name, value in settings.items():
        cmd += ["-s", f"{name}={value}"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False, cwd=work)
    return proc.returncode, json.loads(out.read_text(encoding="utf-8")) if out.exists() else {"log": proc.stderr}


def delivered(work: Path) -> list[str]:
    path = work / "delivered.txt"
    return [Path(u).name for u in path.read_text(encoding="utf-8").split()] if path.exists() else []


@pytest.fixture(params=[pytest.param("embedded", marks=pytest.mark.embedded), "elasticsearch"])
def backend(request: pytest.FixtureRequest, es_url: str, es_client: Elasticsearch,
            tmp_path: Path) -> Iterator[dict[str, Any]]:
    """The settings of one backend, with a store (directory or index) of this test's own."""
    if request.param == "embedded":
        yield {"ZHDEDUP_STORE_DIR": tmp_path / "store"}
        return
    index = f"test-rerun-{tmp_path.name.lower()[-20:]}".rstrip("-_")
    yield {"ZHDEDUP_BACKEND": "elasticsearch", "ZHDEDUP_ES_URL": es_url, "ZHDEDUP_ES_INDEX": index,
           "ZHDEDUP_ES_DEAD_LETTER": tmp_path / "dead.jsonl", "ZHDEDUP_ES_FLUSH_INTERVAL": 1}
    es_client.options(ignore_status=404).indices.delete(index=index)
    es_client.options(ignore_status=404).indices.delete_index_template(name=f"zhdedup-{index}")


UNIQUE = [f"o{i}.html" for i in range(ORIGINALS)]


@pytest.mark.parametrize("mode", ["drop", "annotate"])
def test_a_killed_crawl_resumed_delivers_what_it_judged_and_never_delivered_then_only_new_content(
        site: tuple[str, list[str]], backend: dict[str, Any], mode: str, tmp_path: Path) -> None:
    base, urls = site
    settings = {**backend, "ZHDEDUP_MODE": mode}
    passing = UNIQUE if mode == "drop" else [Path(u).name for u in urls]  # what a crawl delivers
    code, _ = run(urls, tmp_path, settings, kill_at=base + KILL_AT)
    assert code == -9  # SIGKILL: o6 was judged (its verdict recorded), then the process died
    before = delivered(tmp_path)  # what was done with before the kill (pages are fetched while others are judged)
    assert KILL_AT not in before and before == [p for p in passing if p in before]

    code, resumed = run(urls, tmp_path, settings)
    assert code == 0, resumed
    after = delivered(tmp_path)[len(before):]
    assert sorted(before + after) == sorted(passing)  # every page delivered once: none lost, none twice
    assert after == [p for p in passing if p not in before]
    stats = resumed["stats"]
    assert stats["zhdedup/rerun/undelivered"] >= 1  # o6 (and any in flight): judged, never delivered
    assert stats.get("zhdedup/rerun/delivered", 0) == stats.get("zhdedup/dropped/rerun", 0) == len(before)
    assert not list(tmp_path.rglob(".zhdedup-undelivered-*"))  # the killed run's ledger was taken over, then done

    code, again = run(urls, tmp_path, settings)
    assert code == 0 and delivered(tmp_path)[len(before) + len(after):] == []  # nothing new: nothing delivered
    assert again["stats"]["zhdedup/rerun/delivered"] == len(passing)

    code, everything = run(urls, tmp_path, {**settings, "ZHDEDUP_RERUN": "all"})
    assert code == 0 and sorted(delivered(tmp_path)[len(before) + len(after):]) == sorted(passing)
    assert everything["stats"]["zhdedup/rerun/delivered"] == len(passing)
    assert "zhdedup/dropped/rerun" not in everything["stats"]


def test_both_backends_count_a_rerun_alike(site: tuple[str, list[str]], es_url: str, es_client: Elasticsearch,
                                           tmp_path: Path) -> None:
    """The same crawl twice on each backend: the same stats (they counted 28 against 17 reruns)."""
    _, urls = site
    index = "test-rerun-alike"
    stores = {"embedded": {"ZHDEDUP_STORE_DIR": tmp_path / "store"},
              "elasticsearch": {"ZHDEDUP_BACKEND": "elasticsearch", "ZHDEDUP_ES_URL": es_url,
                                "ZHDEDUP_ES_INDEX": index, "ZHDEDUP_ES_DEAD_LETTER": tmp_path / "dead.jsonl"}}
    counted = {}
    try:
        for name, settings in stores.items():
            work = tmp_path / name
            work.mkdir()
            run(urls, work, settings)
            code, second = run(urls, work, settings)
            assert code == 0, second
            counted[name] = {key: second["stats"].get(key, 0) for key in RERUN_STATS}
    finally:
        es_client.options(ignore_status=404).indices.delete(index=index)
        es_client.options(ignore_status=404).indices.delete_index_template(name=f"zhdedup-{index}")
    assert counted["embedded"] == counted["elasticsearch"]
    assert counted["embedded"]["zhdedup/rerun/delivered"] == ORIGINALS
