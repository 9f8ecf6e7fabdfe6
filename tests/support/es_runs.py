"""``zhdedup es …`` and ``scrapy runspider`` run as an operator would, their corpus, and the index read back
over plain HTTP: what the fault, cluster and security tests share (tests/faults/test_es_faults.py says why the
corpus is laid out as it is)."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from tests.support import SUPPORT
from tests.support.waiting import wait_until
from tests.support.zhtexts import articles, edit_chars, news_page, traditional, with_attribution

SPIDER = SUPPORT / "fault_spider.py"
CHUNK = 50  # originals per chunk; each chunk is followed by reposts of half of them
SPACING = CHUNK // 2  # a repost comes at least this many documents after its original
BULK = 10  # documents per bulk: SPACING is more than two bulks
RUN_TIMEOUT = 600  # seconds any one subprocess may take before the test calls it hung
Verdicts = dict[str, tuple[str, str | None, int | None]]  # doc id -> (status, dup_of, distance)


# --- corpus ---------------------------------------------------------------------------------------


@cache
def corpus() -> tuple[dict[str, str], ...]:
    """Real articles as pages; after every CHUNK originals, reposts of half of them (4 kinds of edit)."""
    originals = articles(4 * CHUNK, max_chars=1200)
    out: list[dict[str, str]] = []
    for start in range(0, len(originals), CHUNK):
        chunk = originals[start : start + CHUNK]
        out += [{"id": f"o{start + i}", "html": news_page(a.title, a.text)} for i, a in enumerate(chunk)]
        for i, a in enumerate(chunk[:SPACING]):
            kind = i % 4
            text = (a.text, with_attribution(a.text), edit_chars(a.text, 2, i), traditional(a.text))[kind]
            site = "caijing" if kind else "xinwen"
            out.append({"id": f"r{start + i}", "html": news_page(a.title, text, site=site)})
    return tuple(out)


# --- processes ---------------------------------------------------------------------------------------


def zhdedup_cmd(*args: str | Path) -> list[str]:
    return [sys.executable, "-m", "scrapy_zhdedup.cli", *map(str, args)]


@contextmanager
def running(cmd: list[str], log: Path, cwd: Path | None = None) -> Iterator[subprocess.Popen[bytes]]:
    """A process with its output in ``log``: a pipe nobody reads while a fault is injected would stall it."""
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=cwd)
        try:
            yield proc
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()


def zhdedup(*args: str | Path, timeout: float = RUN_TIMEOUT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(zhdedup_cmd(*args), capture_output=True, text=True, timeout=timeout, check=False)


def ingest_args(url: str, index: str, src: Path, work: Path, dead: Path | None = None) -> list[str | Path]:
    return ["es", "ingest", "--url", url, "--index", index, src, "--bulk-size", str(BULK),
            "--checkpoint-dir", work / "checkpoints", "--dead-letter", dead or work / "dead.jsonl"]


def crawl_cmd(urls: list[str], work: Path, settings: dict[str, Any], item: str = "dict") -> list[str]:
    url_file = work / "urls.txt"
    url_file.write_text("\n".join(urls) + "\n", encoding="utf-8")
    cmd = [sys.executable, "-m", "scrapy", "runspider", str(SPIDER), "-a", f"urls={url_file}",
           "-a", f"out={work / 'result.json'}", "-a", f"item={item}"]
    for name, value in settings.items():
        cmd += ["-s", f"{name}={value}"]
    return cmd


@dataclass
class Crawl:
    returncode: int
    log: str
    result: dict[str, Any] | None  # what fault_spider.py wrote at close; None if the spider never closed


def crawl(urls: list[str], work: Path, settings: dict[str, Any], item: str = "dict") -> Crawl:
    work.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(crawl_cmd(urls, work, settings, item), capture_output=True, text=True,
                          timeout=RUN_TIMEOUT, check=False, cwd=work)
    return crawl_result(work, proc.returncode, proc.stdout + proc.stderr)


def crawl_result(work: Path, returncode: int, log: str) -> Crawl:
    out = work / "result.json"
    result = json.loads(out.read_text(encoding="utf-8")) if out.exists() else None
    return Crawl(returncode, log, result)


def es_settings(url: str, index: str, work: Path, **extra: Any) -> dict[str, Any]:
    return {"ZHDEDUP_BACKEND": "elasticsearch", "ZHDEDUP_ES_URL": url, "ZHDEDUP_ES_INDEX": index,
            "ZHDEDUP_ES_BULK_SIZE": BULK, "ZHDEDUP_ES_FLUSH_INTERVAL": 1,
            "ZHDEDUP_ES_DEAD_LETTER": work / "dead.jsonl", **extra}


# --- Elasticsearch, read over plain HTTP (works while the client under test is misconfigured) --------------


def request_json(method: str, url: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.load(response)


def doc_count(url: str, index: str) -> int:
    try:
        return int(request_json("GET", f"{url}/{index}/_count")["count"])
    except (urllib.error.URLError, OSError):
        return 0  # no index yet, or the node is down


def stored(url: str, index: str) -> Verdicts:
    """Verdict of every stored document by its id; a document stored twice fails the test."""
    request_json("POST", f"{url}/{index}/_refresh")
    hits = request_json("POST", f"{url}/{index}/_search", {"size": 10_000, "_source": ["zhdedup"]})["hits"]["hits"]
    out: Verdicts = {}
    for hit in hits:
        z = hit["_source"]["zhdedup"]
        assert z["doc_id"] not in out, f"{z['doc_id']} stored twice"
        out[z["doc_id"]] = (z["status"], z.get("dup_of"), z.get("distance"))
    return out


def _bulk_routes(url: str) -> list[dict[str, Any]]:
    """The node's HTTP route statistics of bulk requests (``/_bulk``, ``/<index>/_bulk``) since it started."""
    nodes = request_json("GET", f"{url}/_nodes/_local/stats/http")["nodes"].values()
    return [route for node in nodes for path, route in node["http"].get("routes", {}).items() if path.endswith("/_bulk")]


def bulks_answered(url: str) -> int:
    """Bulk requests the node has answered, whatever the answer."""
    return sum(route["responses"]["count"] for route in _bulk_routes(url))


def bulks_in_flight(url: str) -> int:
    """Bulk requests the node has received and not answered yet."""
    return sum(route["requests"]["count"] - route["responses"]["count"] for route in _bulk_routes(url))


def set_write_block(url: str, index: str, blocked: bool) -> None:
    request_json("PUT", f"{url}/{index}/_settings", {"index.blocks.write": blocked})


def wait_for(condition: Any, proc: subprocess.Popen[bytes], what: str) -> None:
    """Poll ``condition`` while ``proc`` runs; the test cannot inject its fault if the run ended first."""
    wait_until(condition, f"{what} (the fault was to be injected mid-run)", RUN_TIMEOUT, proc=proc)


def dead_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()] if path.exists() else []


def replay(url: str, index: str, dead: Path) -> subprocess.CompletedProcess[str]:
    return zhdedup("es", "replay", dead, "--url", url, "--index", index)


def ids_of(records: Any) -> set[str]:
    return {r["id"] for r in records}


def assert_nothing_lost(url: str, index: str, reference: Verdicts, records: Any = None) -> None:
    """Every input id is stored exactly once with the verdict of the uninterrupted run."""
    got = stored(url, index)
    want = {i: reference[i] for i in ids_of(records if records is not None else corpus())}
    missing = sorted(set(want) - set(got))
    assert not missing, f"{len(missing)} documents lost, e.g. {missing[:5]}"
    assert set(got) == set(want)
    differ = {i: (got[i], want[i]) for i in want if got[i] != want[i]}
    assert not differ, f"{len(differ)} verdicts differ from the uninterrupted run: {dict(list(differ.items())[:5])}"


def assert_pages_stored(url: str, index: str, site: str, records: Any, reference: Verdicts,
                        skip: Collection[str] = ()) -> None:
    """Every page of ``records`` (as served under ``site``) stored once, each with the verdict of the
    uninterrupted ingest, but those whose record id is in ``skip``."""
    got = stored(url, index)
    urls = [f"{site}{r['id']}.html" for r in records]
    assert set(got) == set(urls), f"lost: {sorted(set(urls) - set(got))[:5]}"
    for page, record in zip(urls, records):
        if record["id"] in skip:
            continue
        status, dup_of, distance = reference[record["id"]]
        assert got[page] == (status, dup_of and f"{site}{dup_of}.html", distance), page

