"""Items/s of a local Scrapy crawl with the pipeline, against the same crawl without it (issue 40).

    python -m benchmarks crawl [--docs 3000] [--repeat 3] [--workers 1,2]

The pages of ``corpora.corpus.scan_file`` (every line a whole HTML page: real news, mosaics, 30 %
reposts) are served from memory by a threaded HTTP server in its own process, ``/0`` to ``/N-1``.  A
spider requests them all (16 at a time) and yields ``{"url", "html"}`` per page, with no pipeline, then
with ``ZhDedupPipeline`` in annotate mode on the embedded store (every item passes) for each
``ZHDEDUP_WORKERS`` given.  Each crawl runs in a fresh interpreter (a reactor cannot restart); its
rate is items scraped over the time from the first response to the last item, so Scrapy's start-up
and the pipeline's (dictionaries, workers) are left out.  Crawls take turns, ``--repeat`` times;
the best counts, and ratios are to the crawl without the pipeline.  The crawl process's CPU time over
the same window, per item (the least of the repeats), says what the pipeline costs when the machine is
shared: wall-clock rates move with the other processes' load, the CPU a crawl spends far less.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from benchmarks import common
from benchmarks.runner import Benchmark, Result, positive
from corpora.corpus import DEFAULT_SEED, scan_file

BARE = "no pipeline"


def _serve(pages: list[bytes], port: Any) -> None:
    """Serve ``pages`` at ``/<index>`` until killed; ``port`` (a shared value) says where."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            try:
                body = pages[int(self.path.lstrip("/"))]
            except (ValueError, IndexError):
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    port.value = server.server_address[1]
    server.serve_forever()


def crawl(config: dict[str, Any]) -> None:
    """The child: one crawl of ``config["n"]`` pages at ``config["base"]``; writes its figures to ``config["out"]``."""
    import scrapy
    from scrapy import signals
    from scrapy.crawler import CrawlerProcess

    seen: dict[str, float] = {}

    class Pages(scrapy.Spider):
        name = "pages"

        async def start(self) -> Any:
            for i in range(config["n"]):
                yield scrapy.Request(f"{config['base']}/{i}", callback=self.parse)

        def parse(self, response: Any) -> Any:
            if "first" not in seen:
                seen["first"], seen["cpu_first"] = time.perf_counter(), time.process_time()
            yield {"url": response.url, "html": response.body}

    def scraped(item: Any) -> None:
        seen["last"], seen["cpu_last"] = time.perf_counter(), time.process_time()

    settings = {"LOG_LEVEL": "WARNING", "CONCURRENT_REQUESTS": 16, "CONCURRENT_REQUESTS_PER_DOMAIN": 16,
                "ROBOTSTXT_OBEY": False, "TELNETCONSOLE_ENABLED": False, "DOWNLOAD_DELAY": 0,
                "ITEM_PIPELINES": {}, **config["settings"]}
    process = CrawlerProcess(settings)
    crawler = process.create_crawler(Pages)
    crawler.signals.connect(scraped, signal=signals.item_scraped)
    process.crawl(crawler)
    process.start()
    stats = crawler.stats.get_stats() if crawler.stats else {}
    items = stats.get("item_scraped_count", 0)
    seconds = seen.get("last", 0.0) - seen.get("first", 0.0)
    cpu = seen.get("cpu_last", 0.0) - seen.get("cpu_first", 0.0)
    summary = {"items": items, "seconds": seconds, "items_per_s": common.rate(items, seconds),
               "cpu_ms_per_item": 1000 * cpu / items if items else 0.0,
               "judged": stats.get("zhdedup/judged"), "near": stats.get("zhdedup/near"),
               "exact": stats.get("zhdedup/exact")}
    Path(config["out"]).write_text(json.dumps(summary), encoding="utf-8")


def _one(base: str, n: int, settings: dict[str, Any]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out.json"
        config = {"base": base, "n": n, "out": str(out),
                  "settings": {**settings, **({"ZHDEDUP_STORE_DIR": str(Path(tmp) / "store")} if settings else {})}}
        subprocess.run([sys.executable, "-m", "benchmarks.crawl", json.dumps(config)], check=True)
        result: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    if result["items"] != n:
        raise RuntimeError(f"the crawl scraped {result['items']} of {n} pages")
    return result


def run(args: argparse.Namespace) -> Result:
    path = scan_file(args.docs, args.seed, 1.0)
    with open(path, encoding="utf-8") as fh:
        pages = [json.loads(line)["html"].encode("utf-8") for line in fh]
    port = multiprocessing.Value("i", 0)
    server = multiprocessing.get_context("fork").Process(target=_serve, args=(pages, port), daemon=True)
    server.start()
    try:
        while not port.value:
            time.sleep(0.05)
        base = f"http://127.0.0.1:{port.value}"
        pipeline = {"ITEM_PIPELINES": {"scrapy_zhdedup.pipelines.ZhDedupPipeline": 300}, "ZHDEDUP_ID_FIELD": "url",
                    "ZHDEDUP_HTML_FIELD": "html", "ZHDEDUP_MODE": "annotate"}
        settings = {BARE: {}, **{f"ZhDedupPipeline, ZHDEDUP_WORKERS = {w}": {**pipeline, "ZHDEDUP_WORKERS": w}
                                 for w in args.workers}}
        runs: dict[str, list[dict[str, Any]]] = {name: [] for name in settings}
        for _ in range(args.repeat):
            for name, s in settings.items():
                result = _one(base, len(pages), s)
                runs[name].append(result)
                print(f"  {name}: {result['items_per_s']:.0f} items/s, {result['cpu_ms_per_item']:.2f} ms CPU per item",
                      flush=True)
    finally:
        server.kill()
    best = {name: max(rs, key=lambda r: r["items_per_s"]) for name, rs in runs.items()}
    cpu = {name: min(r["cpu_ms_per_item"] for r in rs) for name, rs in runs.items()}
    bare = best[BARE]["items_per_s"]
    rows = [[name, r["items_per_s"], f"{r['items_per_s'] / bare:.2f}x", f"{cpu[name]:.2f}",
             f"{cpu[BARE] / cpu[name]:.2f}x",
             "-" if r["judged"] is None else f"{r['judged']} judged ({r['exact'] or 0} exact, {r['near'] or 0} near)"]
            for name, r in best.items()]
    results = {"pages": len(pages), "file": str(path), "load_average": os.getloadavg(), "runs": runs}
    return Result(results, [common.table(["crawl", "items/s", f"vs {BARE}", "CPU ms/item (least)",
                                                 f"CPU-bound rate vs {BARE}", "verdicts of the best run"], rows)])


def _workers(value: str) -> list[int]:
    return [positive(v) for v in value.split(",")]


def options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--docs", type=positive, default=3000, help="pages (default %(default)s)")
    parser.add_argument("--repeat", type=positive, default=3, help="crawls of each kind, best counts (default %(default)s)")
    parser.add_argument("--workers", type=_workers, default=[1, 2], help="ZHDEDUP_WORKERS values (default 1,2)")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)


BENCHMARKS = (Benchmark("crawl", __doc__, run, options),)

if __name__ == "__main__":
    crawl(json.loads(sys.argv[1]))
