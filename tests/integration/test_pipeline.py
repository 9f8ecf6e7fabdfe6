"""Real Scrapy crawls of a local news site through ``ZhDedupPipeline`` (no mocks).

The site is served by the standard library on 127.0.0.1 from a temporary directory; the
crawls run in a subprocess (tests/support/zhcrawl.py) because a Twisted reactor cannot be restarted.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from scrapy.exceptions import CloseSpider, DropItem
from scrapy.utils.test import get_crawler

from scrapy_zhdedup import DedupConfig, Deduper, EmptyTextError
from scrapy_zhdedup.errors import ConfigError
from scrapy_zhdedup.pipelines import ZhDedupPipeline
from tests.support import SUPPORT, zhtexts
from tests.support.helpers import on_a_small_disk, serving
from tests.support.zhtexts import news_page

HEARTBEAT = 0.02  # seconds between reactor heartbeat ticks in the crawl process (the 5 MB page is judged in 0.15-0.2 s)


EMPTY_PAGE = """<!DOCTYPE html><html><head><meta charset="utf-8"><title>页面不存在</title>
<script>setTimeout(function(){location.href="/"}, 3000);</script><style>body{margin:0}</style></head>
<body><div class="article"><img src="/404.png"></div></body></html>"""


@dataclass(frozen=True)
class Page:
    path: str
    body: bytes
    note: str


def _pages() -> list[Page]:
    a, b, c, d = zhtexts.articles(4, encodings=("gbk", "big5"))
    big = zhtexts.articles(60, offset=200)
    big_body = "".join(f"<p>{p}</p>\n" for x in big for p in zhtexts.paragraphs(x.text))
    big_body *= 5_000_000 // len(big_body.encode("utf-8")) + 1
    big_page = ('<html><head><meta charset="utf-8"><title>合集</title></head>'
                f'<body><div class="article">{big_body}</div></body></html>')
    c_tw = zhtexts.traditional_tw(news_page(c.title, c.text, charset="big5"))
    return [
        Page("xinwen/a.html", news_page(a.title, a.text).encode("utf-8"), "unique"),
        Page("xinwen/b.html", news_page(b.title, b.text).encode("utf-8"), "unique"),
        Page("xinwen/c.html", news_page(c.title, c.text).encode("utf-8"), "unique"),
        Page("caijing/a-typo.html", news_page(a.title, zhtexts.edit_chars(a.text, 1, seed=7), site="caijing",
                                              charset="gbk").encode("gbk"), "near a"),
        Page("xinwen/a-copy.html", news_page(a.title, a.text).encode("utf-8"), "exact a"),
        Page("caijing/b.html", news_page(b.title, b.text, site="caijing", charset="gbk").encode("gbk"), "exact b, GBK"),
        Page("caijing/d.html", news_page(d.title, d.text, site="caijing", charset=None).encode("gbk"),
             "unique, GBK without meta"),
        Page("xinwen/c-big5.html", c_tw.encode("big5"), "c in traditional characters, Big5"),
        Page("xinwen/empty.html", EMPTY_PAGE.encode("utf-8"), "no text"),
        Page("xinwen/notext.html", news_page(a.title, a.text).encode("utf-8"), "item without html field"),
        Page("big.html", big_page.encode("utf-8"), "5 MB page"),
    ]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, list[Page]]]:
    root = tmp_path_factory.mktemp("site")
    pages = _pages()
    for page in pages:
        (root / page.path).parent.mkdir(parents=True, exist_ok=True)
        (root / page.path).write_bytes(page.body)
    with serving(root) as base:
        yield base, pages


def _crawl(workdir: Path, crawls: list[dict[str, Any]],
           wrap: Callable[[list[str]], list[str]] = list) -> tuple[list[dict[str, Any]], str]:
    """Run the crawls in one fresh process (its command passed through ``wrap``); their results and the log."""
    for i, crawl in enumerate(crawls):
        crawl.setdefault("out", str(workdir / f"{crawl['name']}-{i}.json"))
    config = workdir / "crawl-config.json"
    config.write_text(json.dumps({"crawls": crawls, "heartbeat": HEARTBEAT}), encoding="utf-8")
    proc = subprocess.run(wrap([sys.executable, str(SUPPORT / "zhcrawl.py"), str(config)]), cwd=workdir,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-5000:]
    return [json.loads(Path(c["out"]).read_text(encoding="utf-8")) for c in crawls], proc.stderr


def _expected(base: str, pages: list[Page], urls: list[str]) -> dict[str, tuple[str, str | None]]:
    """What the engine, asked directly in the same order, says about each page."""
    deduper = Deduper()
    by_url = {base + p.path: p for p in pages}
    out = {}
    for url in urls:
        try:
            v = deduper.judge(url, html=by_url[url].body)
        except EmptyTextError:
            continue
        out[url] = (v.status, v.dup_of)
    return out


# --- drop mode, persisted across two crawls ------------------------------------------------------

Result = dict[str, Any]  # one crawl's record, as tests/support/zhcrawl.py writes it


@dataclass(frozen=True)
class DropCrawls:
    base: str
    urls: list[str]
    first: Result
    second: Result  # same pages, same JOBDIR
    third: Result  # and again, with ZHDEDUP_RERUN = "all"
    log: str  # of the first crawl (duplicates logged at INFO)
    second_log: str  # of the second (at the default DEBUG, under LOG_LEVEL INFO)
    workdir: Path
    expected: dict[str, tuple[str, str | None]]  # the engine's own verdicts, asked directly


@pytest.fixture(scope="module")
def drop_crawls(site: tuple[str, list[Page]], tmp_path_factory: pytest.TempPathFactory) -> DropCrawls:
    base, pages = site
    workdir = tmp_path_factory.mktemp("drop")
    urls = [base + p.path for p in pages]
    crawl = {"name": "news", "urls": urls, "item": "dict", "no_text": [base + "xinwen/notext.html"],
             "settings": {"JOBDIR": str(workdir / "job")}}
    loud = dict(crawl, settings={**crawl["settings"], "ZHDEDUP_DROP_LOG_LEVEL": "INFO"})
    first, log = _crawl(workdir, [dict(loud, out=str(workdir / "first.json"))])
    everything = dict(crawl, settings={**crawl["settings"], "ZHDEDUP_RERUN": "all"})
    (second, third), second_log = _crawl(workdir, [dict(crawl, out=str(workdir / "second.json")),
                                                   dict(everything, out=str(workdir / "third.json"))])
    expected = _expected(base, pages, [u for u in urls if not u.endswith("notext.html")])
    return DropCrawls(base, urls, first[0], second, third, log, second_log, workdir, expected)


def test_drop_mode_keeps_firsts_and_drops_repeats(drop_crawls: DropCrawls) -> None:
    base, expected = drop_crawls.base, drop_crawls.expected
    kept = [item["url"] for item in drop_crawls.first["items"]]
    dropped = {d["url"]: d["reason"] for d in drop_crawls.first["dropped"]}

    assert expected[base + "caijing/a-typo.html"] == ("near", base + "xinwen/a.html")
    assert expected[base + "xinwen/a-copy.html"] == ("exact", base + "xinwen/a.html")
    assert expected[base + "caijing/b.html"] == ("exact", base + "xinwen/b.html")
    assert expected[base + "xinwen/c-big5.html"][1] == base + "xinwen/c.html"
    assert expected[base + "caijing/d.html"] == ("unique", None)
    assert sorted(kept) == sorted(u for u in drop_crawls.urls if u not in dropped)  # nothing lost
    assert set(dropped) == {u for u, (status, _) in expected.items() if status != "unique"}
    for url, reason in dropped.items():
        status, dup_of = expected[url]
        assert reason == f"zhdedup: {url}: {status} duplicate of {dup_of}" or (
            status == "near" and reason.startswith(f"zhdedup: {url}: near duplicate of {dup_of} (similar, similarity "))
        assert f"INFO: Dropped: {reason}\n" in drop_crawls.log  # one line: no item dump after it
    assert "<html" not in drop_crawls.log.lower()
    assert base + "xinwen/empty.html" in kept and base + "xinwen/notext.html" in kept


def test_drop_mode_stats(drop_crawls: DropCrawls) -> None:
    first = drop_crawls.first
    stats = first["stats"]
    statuses = [status for status, _ in drop_crawls.expected.values()]
    for status in ("unique", "exact", "near"):
        assert stats.get(f"zhdedup/{status}", 0) == statuses.count(status), status
    assert stats["zhdedup/judged"] == len(statuses)
    assert stats["zhdedup/skipped/empty_text"] == 1
    assert stats["zhdedup/skipped/missing_fields"] == 1
    assert stats["item_dropped_count"] == len(first["dropped"]) == statuses.count("exact") + statuses.count("near")
    assert stats["zhdedup/dropped/exact"] == statuses.count("exact")
    assert stats["zhdedup/dropped/near"] == statuses.count("near")
    assert stats["item_scraped_count"] == len(drop_crawls.urls) - len(first["dropped"])


def test_duplicates_are_dropped_at_debug_by_default(drop_crawls: DropCrawls) -> None:
    assert drop_crawls.second["stats"]["item_dropped_count"] > 0
    assert "Dropped:" not in drop_crawls.second_log


def test_skipped_items_are_logged(drop_crawls: DropCrawls) -> None:
    assert f"zhdedup: {drop_crawls.base}xinwen/empty.html passed through unjudged" in drop_crawls.log
    assert "zhdedup: item without 'url' or 'text'/'html' passed through unjudged" in drop_crawls.log


def test_second_crawl_with_the_same_jobdir_delivers_only_what_is_new(drop_crawls: DropCrawls) -> None:
    """Pages crawled again with the same content get their stored verdicts (never "exact duplicate of
    itself"); with ZHDEDUP_RERUN = "new", the default, what the first crawl delivered is not delivered again,
    the repeats are dropped again, and only the items that were never judged pass."""
    first, second = drop_crawls.first, drop_crawls.second
    assert (drop_crawls.workdir / "job" / "zhdedup" / "store.json").exists()
    stats = second["stats"]
    for key in ("zhdedup/judged", "zhdedup/unique", "zhdedup/exact", "zhdedup/near"):
        assert stats.get(key) == first["stats"].get(key), key
    assert stats["zhdedup/rerun/delivered"] == stats["zhdedup/dropped/rerun"] == first["stats"]["zhdedup/unique"]
    assert "zhdedup/rerun/undelivered" not in stats
    unjudged = {drop_crawls.base + "xinwen/empty.html", drop_crawls.base + "xinwen/notext.html"}
    assert {i["url"] for i in second["items"]} == unjudged
    reasons = {d["url"]: d["reason"] for d in second["dropped"]}
    for url in {i["url"] for i in first["items"]} - unjudged:
        assert reasons[url] == f"zhdedup: {url}: delivered by an earlier run (same text; ZHDEDUP_RERUN = 'all' " \
                               "passes it again)"
    assert sorted((d["url"], d["reason"]) for d in first["dropped"]) == sorted(
        (url, reason) for url, reason in reasons.items() if "delivered by an earlier run" not in reason)
    again = drop_crawls.third  # ZHDEDUP_RERUN = "all": the first crawl's items, again
    assert sorted(i["url"] for i in again["items"]) == sorted(i["url"] for i in first["items"])
    assert again["stats"]["zhdedup/rerun/delivered"] == first["stats"]["zhdedup/unique"]


def test_junk_passes_unjudged_like_an_empty_page_counted_apart(tmp_path: Path) -> None:
    """Binary data served as a page and a page of only the site's furniture: WARNING, passed on unjudged,
    ``zhdedup/skipped/junk`` (they were judged `unique` and stored, and every such page of a site a repeat)."""
    root = tmp_path / "junk-site"
    root.mkdir()
    [article] = zhtexts.articles(1)
    (root / "article.html").write_text(news_page(article.title, article.text), encoding="utf-8")
    (root / "image.html").write_bytes(zhtexts.binary_page())
    (root / "chrome.html").write_text(zhtexts.furniture_page(), encoding="utf-8")
    (root / "chrome2.html").write_text(zhtexts.furniture_page("difang"), encoding="utf-8")
    with serving(root) as base:
        urls = [base + name for name in ("article.html", "image.html", "chrome.html", "chrome2.html")]
        (result,), log = _crawl(tmp_path, [{"name": "news", "urls": urls, "item": "dict",
                                            "settings": {"JOBDIR": str(tmp_path / "job")}}])
    stats = result["stats"]
    assert stats["zhdedup/skipped/junk"] == 3 and stats["zhdedup/judged"] == stats["zhdedup/unique"] == 1
    assert f"zhdedup: {base}image.html passed through unjudged: binary data, not text" in log
    assert (f"zhdedup: {base}chrome.html passed through unjudged: no main text: only the site's header, footer, "
            "navigation and sidebar") in log
    assert sorted(item["url"] for item in result["items"]) == sorted(urls)  # passed on, like an empty page


def test_an_item_whose_id_cannot_be_stored_passes_unjudged_and_the_rest_is_kept(
        site: tuple[str, list[Page]], tmp_path: Path) -> None:
    base, pages = site
    urls = [base + p.path for p in pages if not p.path.endswith("notext.html")]
    bad = urls[3]
    crawl = {"name": "news", "urls": urls, "item": "dict", "bad_id": [bad], "settings": {"JOBDIR": str(tmp_path / "job")}}
    (result,), log = _crawl(tmp_path, [crawl])
    stats = result["stats"]
    assert stats["zhdedup/skipped/invalid"] == 1
    assert f"zhdedup: {bad}\\ud800 passed through unjudged: the id contains a lone surrogate" in log
    assert bad + "\ud800" in [i["url"] for i in result["items"]]
    judged = stats["zhdedup/judged"]
    assert judged == len(urls) - 1 - stats.get("zhdedup/skipped/empty_text", 0)
    store = Deduper.open(DedupConfig(), tmp_path / "job" / "zhdedup")  # the crawl's store was kept
    try:
        assert store.store.judged == judged
    finally:
        store.close()


def test_a_full_disk_under_the_store_closes_the_spider_loses_no_item_and_a_recrawl_says_the_same(
        tmp_path: Path) -> None:
    """The embedded store's disk fills mid-crawl: the spider is closed once, naming the file; every item
    that reached the pipeline leaves it (the rest unjudged); crawling again with the store the disk kept
    gives every page the verdict of an uninterrupted crawl."""
    originals = zhtexts.articles(30, offset=100, max_chars=1200)
    pages = [Page(f"o{i}.html", news_page(a.title, a.text).encode("utf-8"), "unique") for i, a in enumerate(originals)]
    pages += [Page(f"r{i}.html", news_page(a.title, zhtexts.edit_chars(a.text, 1, seed=i), site="caijing")
                   .encode("utf-8"), "near") for i, a in enumerate(originals[:10])]
    root, disk, kept = tmp_path / "site", tmp_path / "disk", tmp_path / "kept"
    root.mkdir()
    for page in pages:
        (root / page.path).write_bytes(page.body)
    with serving(root) as base:
        urls = [base + p.path for p in pages]
        crawl = {"name": "news", "urls": urls, "item": "dict",
                 "settings": {"ZHDEDUP_MODE": "annotate", "ZHDEDUP_STORE_DIR": str(disk / "store")}}
        (full,), log = _crawl(tmp_path, [crawl], lambda cmd: on_a_small_disk(cmd, disk, "16k", keep=kept))
        again = dict(crawl, settings={**crawl["settings"], "ZHDEDUP_STORE_DIR": str(kept / "store"),
                                      "ZHDEDUP_RERUN": "all"})
        (resumed,), _ = _crawl(tmp_path, [again])
    stats = full["stats"]
    assert stats["finish_reason"] == "zhdedup_store_failed" and full["errors"] == [] and full["dropped"] == []
    assert f"{disk / 'store' / 'log.bin'}: cannot remember " in log and "No space left on device" in log
    left = [item["url"] for item in full["items"]]
    assert left == urls[: stats["response_received_count"]]  # every item that came in went on: none lost
    unjudged = stats["zhdedup/skipped/store_failed"]
    assert unjudged >= 1 and stats["zhdedup/judged"] + unjudged == len(left) < len(urls)
    assert all("dedup_status" not in item for item in full["items"][-unjudged:])
    expected = _expected(base, pages, urls)
    got = {item["url"]: (item["dedup_status"], item["dup_of"]) for item in resumed["items"]}
    assert got == expected and resumed["stats"]["zhdedup/rerun/delivered"] == stats["zhdedup/judged"]


def test_worker_processes_give_the_same_verdicts_and_a_killed_worker_loses_no_item(
        drop_crawls: DropCrawls, site: tuple[str, list[Page]], tmp_path: Path) -> None:
    """ZHDEDUP_WORKERS = 2: the same items kept and dropped, for the same reasons, as one thread, also when
    one worker process is killed in the middle of the crawl (its pool is replaced, the item sent again)."""
    base, _ = site
    urls = drop_crawls.urls
    crawl = {"name": "news", "urls": urls, "item": "dict", "no_text": [base + "xinwen/notext.html"],
             "kill_worker_at": [urls[len(urls) // 2]], "settings": {"ZHDEDUP_WORKERS": 2}}
    (result,), log = _crawl(tmp_path, [crawl])
    first = drop_crawls.first
    assert sorted(i["url"] for i in result["items"]) == sorted(i["url"] for i in first["items"])
    assert sorted((d["url"], d["reason"]) for d in result["dropped"]) == sorted(
        (d["url"], d["reason"]) for d in first["dropped"])
    assert result["stats"]["zhdedup/judged"] == first["stats"]["zhdedup/judged"] and not result["errors"]
    assert "zhdedup: a worker process died; starting 2 new ones" in log


def test_reactor_keeps_ticking_while_a_large_page_is_judged(drop_crawls: DropCrawls) -> None:
    first = drop_crawls.first
    entered, left = first["timing"][drop_crawls.base + "big.html"]
    window = left - entered
    ticks = [t for t in first["ticks"] if entered <= t <= left]
    gaps = [b - a for a, b in zip([entered, *ticks], [*ticks, left])]
    # The 5 MB page takes a noticeable time to judge; a blocked reactor would not tick at all.
    assert window > 4 * HEARTBEAT, f"judging took only {window:.3f} s: the test cannot tell"
    assert len(ticks) >= max(2, 0.25 * window / HEARTBEAT), (len(ticks), window)
    assert max(gaps) < max(0.5 * window, 1.0), (max(gaps), window)


# --- annotate mode and item types -----------------------------------------------------------------


@dataclass(frozen=True)
class AnnotateCrawls:
    base: str
    urls: list[str]
    results: dict[str, Result]  # by crawl name
    log: str


@pytest.fixture(scope="module")
def annotate_crawls(site: tuple[str, list[Page]], tmp_path_factory: pytest.TempPathFactory) -> AnnotateCrawls:
    base, _ = site
    workdir = tmp_path_factory.mktemp("annotate")
    urls = [base + p for p in ("xinwen/a.html", "caijing/a-typo.html", "xinwen/a-copy.html", "xinwen/b.html",
                               "xinwen/empty.html", "xinwen/notext.html")]
    common = {"urls": urls, "no_text": [base + "xinwen/notext.html"]}
    annotate = {"ZHDEDUP_MODE": "annotate"}
    crawls = [
        dict(common, name="dicts", item="dict", as_str=True, settings=annotate),
        dict(common, name="items", item="item", settings=annotate),
        dict(common, name="dataclasses", item="dataclass", settings=annotate),
        dict(common, name="attrs", item="attrs", settings=annotate),
        dict(common, name="renamed", item="dict",
             settings={**annotate, "ZHDEDUP_FIELDS": {"status": "verdict", "cluster": "story"}}),
        dict(common, name="bare", item="bare_item", settings=annotate),
    ]
    results, log = _crawl(workdir, crawls)
    return AnnotateCrawls(base, urls, dict(zip((c["name"] for c in crawls), results)), log)


@pytest.mark.parametrize(("name", "type_name"), [
    ("dicts", "dict"), ("items", "NewsItem"), ("dataclasses", "NewsRecord"), ("attrs", "NewsAttrs"),
])
def test_annotate_mode_keeps_every_item_and_sets_the_fields(annotate_crawls: AnnotateCrawls, name: str,
                                                             type_name: str) -> None:
    base, result = annotate_crawls.base, annotate_crawls.results[name]
    assert result["dropped"] == [] and result["errors"] == []
    items = {item["url"]: item for item in result["items"]}
    assert sorted(items) == sorted(annotate_crawls.urls) and {item["type"] for item in items.values()} == {type_name}
    a = base + "xinwen/a.html"
    got = {url: (i.get("dedup_status"), i.get("dup_of"), i.get("dup_distance"), i.get("cluster_id"))
           for url, i in items.items()}
    assert got[a] == ("unique", None, None, a)
    status, dup_of, distance, cluster = got[base + "caijing/a-typo.html"]
    assert (status, dup_of, cluster) == ("near", a, a) and isinstance(distance, int) and 0 <= distance <= 12
    assert got[base + "xinwen/a-copy.html"] == ("exact", a, 0, a)
    assert got[base + "xinwen/b.html"] == ("unique", None, None, base + "xinwen/b.html")
    assert got[base + "xinwen/empty.html"] == got[base + "xinwen/notext.html"] == (None, None, None, None)
    stats = result["stats"]
    assert (stats["zhdedup/unique"], stats["zhdedup/near"], stats["zhdedup/exact"]) == (2, 1, 1)
    assert stats.get("item_dropped_count", 0) == 0


def test_annotate_mode_with_renamed_fields(annotate_crawls: AnnotateCrawls) -> None:
    items = {item["url"]: item for item in annotate_crawls.results["renamed"]["items"]}
    copy = items[annotate_crawls.base + "xinwen/a-copy.html"]
    assert (copy["verdict"], copy["story"]) == ("exact", annotate_crawls.base + "xinwen/a.html")
    assert not set(copy) & {"dedup_status", "dup_of", "dup_distance", "cluster_id"}


def test_item_without_the_annotation_fields_closes_the_spider_before_judging(annotate_crawls: AnnotateCrawls) -> None:
    result = annotate_crawls.results["bare"]
    stats = result["stats"]
    assert stats["finish_reason"] == "zhdedup_cannot_annotate"
    assert result["errors"] == [] and result["items"] == []  # refused, not failed item by item or passed unannotated
    assert "zhdedup/judged" not in stats  # nothing judged, so nothing remembered as seen
    assert "zhdedup cannot set 'dedup_status' on BareItem: declare the field, or rename/remove it in ZHDEDUP_FIELDS" \
        in stats["zhdedup/error"]
    assert "no item was judged; closing the spider" in annotate_crawls.log


@pytest.mark.parametrize(("name", "backend"), [
    ("embedded", "EmbeddedBackend"), ("scrapy_zhdedup.pipelines.backends.EmbeddedBackend", "EmbeddedBackend")])
def test_backend_is_loaded_by_name_or_dotted_path(name: str, backend: str) -> None:
    pipeline = ZhDedupPipeline.from_crawler(get_crawler(settings_dict={"ZHDEDUP_BACKEND": name}))
    assert type(pipeline.backend).__name__ == backend


@pytest.mark.parametrize("stores", [False, True])
def test_a_third_backend_implements_only_judge(stores: bool) -> None:
    """Issue 42: the base class gives the rest (open, close, the line at open, no ledger); the item's fields
    are handed over, without the page, only to a backend that stores documents."""
    name = "tests.support.backends." + ("StoresDocuments" if stores else "JudgeOnly")
    pipeline = ZhDedupPipeline.from_crawler(get_crawler(settings_dict={"ZHDEDUP_BACKEND": name}))
    text = zhtexts.articles(1)[0].text
    items = [{"url": "a", "text": text, "html": None}, {"url": "b", "text": text, "html": None}]

    async def crawl() -> list[Any]:
        await pipeline.open_spider()
        passed = []
        for item in items:
            with contextlib.suppress(DropItem):
                passed.append(await pipeline.process_item(item))
        await pipeline.close_spider()
        return passed

    assert [item["url"] for item in asyncio.run(crawl())] == ["a"]
    assert pipeline.ledger is None and pipeline.backend is not None
    assert pipeline.backend.describe() == name.rsplit(".", 1)[1]
    expected = [{"url": "a", "text": text}, {"url": "b", "text": text}] if stores else [{}, {}]
    assert pipeline.backend.documents == expected  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", ["nosuch", "scrapy_zhdedup.pipelines.backends.NoSuchBackend", "no_such_module.Backend",
                                  "scrapy_zhdedup.Deduper"])
def test_unknown_backend_is_a_config_error_said_at_open(name: str) -> None:
    pipeline = ZhDedupPipeline.from_crawler(get_crawler(settings_dict={"ZHDEDUP_BACKEND": name}))
    assert isinstance(pipeline.problem, ConfigError) and "ZHDEDUP_BACKEND" in str(pipeline.problem)
    with pytest.raises(CloseSpider) as closed:
        asyncio.run(pipeline.open_spider())
    assert closed.value.reason == "zhdedup_cannot_start"


def test_a_crawl_that_cannot_start_says_so_in_one_line(site: tuple[str, list[Page]], tmp_path: Path) -> None:
    """Issue 33, item 4: a backend that cannot be loaded (the [es] extra missing), or a store that cannot
    be opened, is one ERROR line and a closed spider (it was ~65 lines of tracebacks)."""
    base, pages = site
    urls = [base + p.path for p in pages[:3]]
    (tmp_path / "store").write_text("a file where the store directory should be", encoding="utf-8")
    crawls = [{"name": "news", "urls": urls, "item": "dict", "settings": settings} for settings in (
        {"ZHDEDUP_BACKEND": "no_such_module.Backend"}, {"ZHDEDUP_STORE_DIR": str(tmp_path / "store")})]
    results, log = _crawl(tmp_path, crawls)
    assert "Traceback" not in log and "Task exception" not in log, log[-3000:]
    errors = [line for line in log.splitlines() if "ERROR" in line]
    assert len(errors) == 2 and all("zhdedup: cannot start, the crawl stops: " in e for e in errors), errors
    assert "cannot import no_such_module.Backend" in errors[0] and str(tmp_path / "store") in errors[1]
    for result in results:
        assert result["stats"]["finish_reason"] == "zhdedup_cannot_start" and result["items"] == []
        assert result["stats"].get("downloader/request_count", 0) == 0


def test_a_drop_line_says_what_decided_not_the_hamming_distance() -> None:
    """Issue 33, item 7: ``(distance 8)`` under ``ZHDEDUP_THRESHOLD = 3`` read as a bug; the similarity
    decides, and the rule that decided is named once the verdict carries one (``reason``)."""
    from scrapy_zhdedup.explain import drop_reason
    from scrapy_zhdedup.model import Verdict

    near = Verdict("b", "near", "a", 8, "a", "0" * 32, 1, similarity=0.93, contained=0.95, reason="similar")
    assert drop_reason("b", near) == "b: near duplicate of a (similar, similarity 0.93)"
    cut = Verdict("b", "near", "a", 8, "a", "0" * 32, 1, similarity=0.57, contained=1.0, reason="contained")
    assert drop_reason("b", cut) == "b: near duplicate of a (contained: 100% of it inside, similarity 0.57)"
    exact = Verdict("c", "exact", "a", 0, "a", "0" * 32, None, similarity=1.0)
    assert drop_reason("c", exact) == "c: exact duplicate of a"
