"""Several crawlers, one index: N ``scrapy crawl news_redis`` processes fed from one scrapy-redis queue,
all writing to one Elasticsearch index through the scrapy-zhdedup pipeline, then ``zhdedup es reconcile``.

    bash scripts/redis.sh start && bash scripts/es-node.sh start
    python examples/run_distributed.py --crawlers 4 --redis-url "$(bash scripts/redis.sh url)" \\
        --es-url "$(bash scripts/es-node.sh url)" [--mode drop|annotate] [--rounds 12]

The site is the example's (``examples/site/generate.py``) published ``--rounds`` times, so the crawlers
overlap in time; its ``manifest.json`` says which page derives from which article.  The runner seeds
the queue with the portal page, starts the crawlers together (each pops pages from the shared queue,
so an article and its reposts land on different processes), waits for them to drain the queue, and
counts against the manifest, before and after ``zhdedup es reconcile``:

* repeats missed: pages passed as unique (to a feed, or in the index) beyond the first of their article;
  after reconcile, those the index still holds as unique;
* false merges: a page marked (or dropped) as the repeat of, or clustered with, another article's page;
* lost: a page neither delivered to a feed nor dropped as a repeat, an article none of whose pages is in
  the index, or (annotate mode) a page delivered but not in the index;
* dangling: a stored repeat of a document the index does not hold, or a dropped one of a page neither
  stored nor delivered (followed through pages dropped themselves: "chained"): the repeat of nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
PROJECT = ROOT / "examples" / "zhnews"
SPIDER = "news_redis"
QUEUE_KEYS = (f"{SPIDER}:start_urls", f"{SPIDER}:requests", f"{SPIDER}:dupefilter")
FEED_FIELDS = "url,dedup_status,dup_of,cluster_id"
DROPPED = re.compile(r"zhdedup: (\S+): (?:near|exact) duplicate of (\S+?)(?: \(|$)", re.MULTILINE)

if str(ROOT) not in sys.path:  # run as a script: make `examples` and `corpora` importable
    sys.path.insert(0, str(ROOT))


@dataclass
class Tally:
    """One index's verdicts against the site's manifest (paths are the pages' paths on the site)."""

    pages: int = 0
    repeats: int = 0  # pages beyond the first of their article
    missed: list[str] = field(default_factory=list)
    false_merges: list[dict[str, str]] = field(default_factory=list)  # {"page", "with"}
    lost: list[str] = field(default_factory=list)
    dangling: list[dict[str, str]] = field(default_factory=list)  # {"page", "dup_of"}
    chained: list[dict[str, str]] = field(default_factory=list)  # dropped as the repeat of a page dropped itself
    statuses: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not (self.false_merges or self.lost or self.dangling)


def path_of(url: str) -> str:
    return urlsplit(url).path.lstrip("/")


def tally(manifest: dict[str, Any], stored: dict[str, dict[str, Any]], delivered: dict[str, str | None],
          dropped: dict[str, str], mode: str, feeds_count: bool = True) -> Tally:
    """Count ``stored`` (url -> its ``zhdedup`` object in the index), ``delivered`` (url -> the status the
    feed got, None in drop mode) and ``dropped`` (url -> the url it was dropped as a repeat of) against
    ``manifest``.  A repeat is missed if it passed as unique, to the feed or in the index; in drop mode a
    page delivered but not stored is such a repeat (the exact copy that lost a race to the index).  With
    ``feeds_count`` False only the index's verdicts count as missed (after ``es reconcile``, which repairs
    the index, not what the feeds received)."""
    group = {path: info["base"] for path, info in manifest["pages"].items()}
    out = Tally(pages=len(group), repeats=len(group) - len(set(group.values())),
                statuses=dict(Counter(z["status"] for z in stored.values())))
    uniques: dict[str, set[str]] = defaultdict(set)
    passed = [url for url, status in delivered.items() if feeds_count and status in (None, "unique")]
    for url in [*passed, *(url for url, z in stored.items() if z["status"] == "unique")]:
        uniques[group[path_of(url)]].add(path_of(url))
    out.missed = sorted(p for pages in uniques.values() for p in sorted(pages)[1:])
    for url, z in stored.items():
        for other in (z.get("dup_of"), z.get("cluster")):
            if other and group[path_of(other)] != group[path_of(url)]:
                out.false_merges.append({"page": path_of(url), "with": path_of(other)})
        if z.get("dup_of") and z["dup_of"] not in stored:
            out.dangling.append({"page": path_of(url), "dup_of": path_of(z["dup_of"])})
    for url, dup_of in dropped.items():
        if group[path_of(dup_of)] != group[path_of(url)]:
            out.false_merges.append({"page": path_of(url), "with": path_of(dup_of)})
        if dup_of in dropped:  # a repeat of a page dropped itself: followed to what that one repeats
            out.chained.append({"page": path_of(url), "dup_of": path_of(dup_of)})
        head, seen = dup_of, {url}
        while head in dropped and head not in seen:
            seen.add(head)
            head = dropped[head]
        if head not in stored and head not in delivered:  # in drop mode the feed is what a repeat points to
            out.dangling.append({"page": path_of(url), "dup_of": path_of(dup_of)})
    unjudged = set(group) - {path_of(u) for u in [*delivered, *dropped]}
    unstored = {path_of(u) for u in delivered if u not in stored} if mode == "annotate" else set()
    in_index = {group[path_of(u)] for u in stored}
    unstored |= {p for p in group if group[p] not in in_index}  # an article none of whose pages is stored
    out.lost = sorted(unjudged | unstored)
    return out


# --- the queue, the crawlers, the index ----------------------------------------------------------------


def seed(redis_url: str, start_url: str) -> None:
    """Clear what an earlier crawl left in the queue (its requests and request fingerprints) and push the
    portal page: ``redis-cli DEL news_redis:requests news_redis:dupefilter`` and ``LPUSH
    news_redis:start_urls '{"url": …}'`` do the same."""
    import redis

    with contextlib.closing(redis.Redis.from_url(redis_url)) as server:
        server.delete(*QUEUE_KEYS)
        server.lpush(f"{SPIDER}:start_urls", json.dumps({"url": start_url}))


def crawl_env(es_url: str, index: str, redis_url: str, mode: str, work: Path) -> dict[str, str]:
    """The environment every crawler gets: the project's settings read these (settings.py)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZHDEDUP_")}
    pythonpath = os.pathsep.join(filter(None, [str(PROJECT), str(ROOT), env.get("PYTHONPATH")]))
    return {**env, "PYTHONPATH": pythonpath, "REDIS_URL": redis_url, "ZHDEDUP_BACKEND": "elasticsearch",
            "ZHDEDUP_ES_URL": es_url, "ZHDEDUP_ES_INDEX": index, "ZHDEDUP_MODE": mode,
            "ZHDEDUP_DROP_LOG_LEVEL": "INFO", "ZHDEDUP_ES_DEAD_LETTER": str(work / "dead-letter.jsonl")}


def crawler_cmd(feed: Path) -> list[str]:
    """One crawler: ``scrapy crawl news_redis`` in the example project, its feed in ``feed``."""
    return [sys.executable, "-m", "scrapy", "crawl", SPIDER, "-O", f"{feed}:jsonlines",
            "-s", f"FEED_EXPORT_FIELDS={FEED_FIELDS}", "-s", "LOG_LEVEL=INFO"]


@contextlib.contextmanager
def crawlers(n: int, env: dict[str, str], work: Path, first: int = 0) -> Iterator[list[subprocess.Popen[bytes]]]:
    """N crawlers started together, each logging to ``work/crawler-<i>.log`` (numbered from ``first``: a
    second crawl in ``work`` keeps the first one's feeds and logs); killed if left running."""
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for i in range(first, first + n):
            with (work / f"crawler-{i}.log").open("wb") as log:
                procs.append(subprocess.Popen(crawler_cmd(work / f"feed-{i}.jsonl"), cwd=PROJECT, env=env,
                                              stdout=log, stderr=subprocess.STDOUT))
        yield procs
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait()


def outputs(work: Path) -> tuple[dict[str, str | None], dict[str, str]]:
    """What every crawler's feed got (url -> status) and what each dropped as a repeat (url -> the url it
    repeats, from the INFO lines it logged)."""
    delivered: dict[str, str | None] = {}
    dropped: dict[str, str] = {}
    for feed in sorted(work.glob("feed-*.jsonl")):
        for line in feed.read_text(encoding="utf-8").splitlines():
            item = json.loads(line)
            delivered[item["url"]] = item.get("dedup_status")
    for log in sorted(work.glob("crawler-*.log")):
        dropped.update(DROPPED.findall(log.read_text(encoding="utf-8", errors="replace")))
    return delivered, dropped


def stored_docs(es_url: str, index: str) -> dict[str, dict[str, Any]]:
    """Every document's ``zhdedup`` object, by its id (the page's url)."""
    from elasticsearch import Elasticsearch, helpers

    with Elasticsearch(es_url.split(","), request_timeout=60) as client:
        client.indices.refresh(index=index)
        hits = helpers.scan(client, index=index, query={"query": {"match_all": {}}}, _source=["zhdedup"])
        return {hit["_source"]["zhdedup"]["doc_id"]: hit["_source"]["zhdedup"] for hit in hits}


def zhdedup_es(*args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "scrapy_zhdedup.cli", "es", *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed (exit {proc.returncode}):\n{proc.stderr.strip()}")
    return proc


def drop_index(es_url: str, index: str) -> None:
    """Remove the index, those named after it (``<index>-*``) and its ``zhdedup-<index>`` template."""
    from elasticsearch import Elasticsearch

    from es_plugin.index.template import template_name

    with Elasticsearch(es_url.split(","), request_timeout=30) as client:
        for name in client.indices.get(index=f"{index},{index}-*", expand_wildcards="all", ignore_unavailable=True):
            client.indices.delete(index=name)
        client.options(ignore_status=404).indices.delete_index_template(name=template_name(index))


# --- the recipe -------------------------------------------------------------------------------------


def run(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """Generate and serve the site, crawl it with ``args.crawlers`` processes, count, reconcile, count."""
    from examples.site.generate import generate
    from examples.site.serve import start_server

    manifest = generate(work / "site", rounds=args.rounds)
    index = args.es_index or f"zhdedup-distributed-{int(time.time())}-{os.getpid()}"
    zhdedup_es("install", "--url", args.es_url, "--index", index)  # one template, before the crawlers race
    server, base_url = start_server(work / "site")
    started = time.perf_counter()
    try:
        seed(args.redis_url, base_url + "index.html")
        env = crawl_env(args.es_url, index, args.redis_url, args.mode, work)
        with crawlers(args.crawlers, env, work) as procs:
            codes = [proc.wait() for proc in procs]
        if any(codes):
            raise SystemExit(f"a crawler failed (exit codes {codes}); see {work}/crawler-*.log")
        elapsed = time.perf_counter() - started
        delivered, dropped = outputs(work)
        before = tally(manifest, stored_docs(args.es_url, index), delivered, dropped, args.mode)
        zhdedup_es("reconcile", "--url", args.es_url, "--index", index)
        after = tally(manifest, stored_docs(args.es_url, index), delivered, dropped, args.mode, feeds_count=False)
    finally:
        server.shutdown()
        server.server_close()
        if not args.keep_index:
            drop_index(args.es_url, index)
    return {"crawlers": args.crawlers, "mode": args.mode, "index": index, "seconds": round(elapsed, 1),
            "before_reconcile": asdict(before), "after_reconcile": asdict(after), "ok": before.ok and after.ok}


def summary(result: dict[str, Any]) -> str:
    lines = [f"{result['crawlers']} crawlers, {result['mode']} mode, index {result['index']}: "
             f"crawled in {result['seconds']} s"]
    for when in ("before_reconcile", "after_reconcile"):
        t = result[when]
        lines.append(f"  {when.replace('_', ' ')}: {len(t['missed'])} of {t['repeats']} repeats missed, "
                     f"{len(t['false_merges'])} false merges, {len(t['lost'])} pages lost, "
                     f"{len(t['dangling'])} repeats of nothing, {len(t['chained'])} of a page dropped itself")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python examples/run_distributed.py", description=__doc__.split("\n")[0])
    parser.add_argument("--crawlers", type=int, default=4, help="scrapy crawl processes (default 4)")
    parser.add_argument("--mode", choices=("drop", "annotate"), default="drop")
    parser.add_argument("--rounds", type=int, default=12, help="times the site's plan is published (default 12)")
    parser.add_argument("--redis-url", default=os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"))
    parser.add_argument("--es-url", default=os.environ.get("ZHDEDUP_ES_URL", "http://127.0.0.1:9200"))
    parser.add_argument("--es-index", help="index to use (default: a new one)")
    parser.add_argument("--keep-index", action="store_true", help="keep the index after the run")
    parser.add_argument("--work-dir", type=Path, help="where the site, feeds and logs go (default: a temp dir)")
    parser.add_argument("--json", type=Path, help="also write the counts as JSON here")
    args = parser.parse_args(argv)
    with contextlib.ExitStack() as stack:
        work = args.work_dir or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="zhdedup-distributed-")))
        work.mkdir(parents=True, exist_ok=True)
        result = run(args, work)
    print(summary(result))
    if args.json:
        args.json.write_text(json.dumps(result, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
