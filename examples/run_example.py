"""The example end to end: generate a small Chinese news site, serve it locally, crawl it through
the scrapy-zhdedup pipeline and report which pages repeat which, checked against the truth.

    python examples/run_example.py                                   # embedded store
    python examples/run_example.py --backend elasticsearch --es-url http://127.0.0.1:9200

The site (``examples/site/generate.py``) republishes real articles across three sites, in GBK
and Big5 as well as UTF-8, with the edits real reposts have, and records in ``manifest.json``
which page derives from which article.  The crawl (``examples/zhnews``, ``scrapy crawl news``)
runs in annotate mode, so every item carries its verdict; the report reads them from the feed.
A duplicate verdict is correct when the page it names derives from the same article; every page
beyond the first of an article should get one ("missed" otherwise).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
PROJECT = ROOT / "examples" / "zhnews"
FEED_FIELDS = "url,title,site,dedup_status,dup_of,dup_similarity,cluster_id"

if str(ROOT) not in sys.path:  # run as a script: make `examples` and `corpora` importable
    sys.path.insert(0, str(ROOT))


@dataclass
class Report:
    """What the crawl decided, compared with the manifest; ``--json`` writes it as is."""

    seen: int = 0
    statuses: dict[str, int] = field(default_factory=dict)
    expected_duplicates: int = 0
    correct: int = 0
    missed: list[str] = field(default_factory=list)
    wrongly_merged: list[dict[str, str]] = field(default_factory=list)  # {"page", "dup_of"}
    not_crawled: list[str] = field(default_factory=list)
    clusters: list[dict[str, Any]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.missed or self.wrongly_merged or self.not_crawled)


def page_path(url: str) -> str:
    return urlsplit(url).path.lstrip("/")


def build_report(items: Sequence[dict[str, Any]], manifest: dict[str, Any]) -> Report:
    """Compare the annotated items (in the order they were judged) with the site's manifest."""
    pages = manifest["pages"]
    group_of = {path: info["base"] for path, info in pages.items()}
    report = Report(seen=len(items), statuses=dict(Counter(i.get("dedup_status") or "unjudged" for i in items)))
    by_path = {page_path(i["url"]): i for i in items}
    report.not_crawled = sorted(set(pages) - set(by_path))
    strangers = sorted(set(by_path) - set(pages))
    if strangers:
        raise ValueError(f"crawled pages the manifest does not know: {strangers}")

    crawled_groups: dict[str, list[str]] = defaultdict(list)  # article -> its pages, in judging order
    for item in items:
        path = page_path(item["url"])
        crawled_groups[group_of[path]].append(path)
    report.expected_duplicates = sum(len(paths) - 1 for paths in crawled_groups.values())

    correct_in: Counter[str] = Counter()
    for item in items:
        path = page_path(item["url"])
        if item.get("dup_of"):
            if group_of.get(page_path(item["dup_of"])) == group_of[path]:
                correct_in[group_of[path]] += 1
            else:
                report.wrongly_merged.append({"page": path, "dup_of": page_path(item["dup_of"])})
    report.correct = sum(correct_in.values())
    for group, paths in crawled_groups.items():
        lost = len(paths) - 1 - correct_in[group]
        if lost > 0:  # name the pages judged unique after the first page of their article
            uniques = [p for p in paths if not by_path[p].get("dup_of")]
            report.missed.extend(uniques[1:][:lost] or paths[-lost:])

    members: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for item in items:
        members[item.get("cluster_id") or item["url"]].append(item)
    for root, its in members.items():
        if len(its) < 2:
            continue
        root_path = page_path(root)
        report.clusters.append({
            "first": root_path,
            "article": group_of.get(root_path),
            "repeats": [{"page": page_path(i["url"]), "status": i["dedup_status"], "dup_of": page_path(i["dup_of"]),
                         "similarity": i.get("dup_similarity"), "transform": pages[page_path(i["url"])]["transform"],
                         "correct": group_of.get(page_path(i["dup_of"])) == group_of[page_path(i["url"])]}
                        for i in its if i.get("dup_of")],
        })
    return report


def format_report(report: Report, manifest: dict[str, Any]) -> str:
    pages = manifest["pages"]
    s = report.statuses
    lines = [
        f"items seen: {report.seen}   unique: {s.get('unique', 0)}   exact: {s.get('exact', 0)}   "
        f"near: {s.get('near', 0)}" + (f"   unjudged: {s['unjudged']}" if s.get("unjudged") else ""),
        "",
        "clusters (first page  ←  pages judged to repeat it; in brackets, what this demo's site generator did",
        "to the article on that page: original = its first publication, copy, print, traditional, edit_chars, …):",
    ]
    for c in report.clusters:
        lines.append(f"  {c['first']}  [{pages[c['first']]['title'][:24]}]")
        for r in c["repeats"]:
            via = "" if r["dup_of"] == c["first"] else f" via {r['dup_of']}"
            mark = "ok" if r["correct"] else "WRONG"
            lines.append(f"    ← {r['page']:24} {r['status']:5} similarity {r['similarity'] or 0:.2f}{via}  "
                         f"({r['transform']})  {mark}")
    lines += [
        "",
        f"against the manifest: {report.correct}/{report.expected_duplicates} repeats found, "
        f"{len(report.missed)} missed, {len(report.wrongly_merged)} wrongly merged"
        + (f", {len(report.not_crawled)} pages not crawled" if report.not_crawled else ""),
    ]
    siblings: dict[str, list[str]] = defaultdict(list)
    for path, info in pages.items():
        siblings[info["base"]].append(path)
    for path in report.missed:
        others = [p for p in siblings[pages[path]["base"]] if p != path]
        lines.append(f"  missed: {path} ({pages[path]['transform']}) judged unique, "
                     f"but it is the same article as {', '.join(others)}")
    for wrong in report.wrongly_merged:
        lines.append(f"  wrongly merged: {wrong['page']} was called a repeat of {wrong['dup_of']}, another article")
    for path in report.not_crawled:
        lines.append(f"  not crawled: {path}")
    same_topic = [p for p in manifest.get("same_topic", []) if p in pages]
    if same_topic:
        apart = not {w["page"] for w in report.wrongly_merged} & set(same_topic)
        lines.append(f"same-topic articles in one template ({', '.join(same_topic)}): "
                     + ("kept apart" if apart else "MERGED"))
    return "\n".join(lines)


# --- running it -------------------------------------------------------------------------------


def crawl(start_url: str, feed: Path, env: dict[str, str], verbose: bool) -> None:
    """``scrapy crawl news`` in the example project, in a subprocess (as a user would run it)."""
    cmd = [sys.executable, "-m", "scrapy", "crawl", "news", "-a", f"start_url={start_url}",
           "-O", f"{feed}:jsonlines", "-s", f"FEED_EXPORT_FIELDS={FEED_FIELDS}",
           "-s", f"LOG_LEVEL={'INFO' if verbose else 'WARNING'}"]
    pythonpath = os.pathsep.join(filter(None, [str(PROJECT), str(ROOT), env.get("PYTHONPATH")]))
    proc = subprocess.run(cmd, cwd=PROJECT, env={**env, "PYTHONPATH": pythonpath}, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"the crawl failed (exit code {proc.returncode}): {' '.join(cmd)}")


def drop_es_index(url: str, index: str) -> None:
    """Remove what the run created in Elasticsearch: the index and its ``zhdedup-<index>`` template."""
    from elasticsearch import Elasticsearch

    from es_plugin.index.template import template_name

    with Elasticsearch(url, request_timeout=30) as client:
        client.indices.delete(index=index, ignore_unavailable=True)
        client.options(ignore_status=404).indices.delete_index_template(name=template_name(index))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python examples/run_example.py", description=__doc__.split("\n")[0])
    parser.add_argument("--backend", choices=("embedded", "elasticsearch"), default="embedded")
    parser.add_argument("--es-url", default=os.environ.get("ZHDEDUP_ES_URL", "http://127.0.0.1:9200"))
    parser.add_argument("--es-index", help="index to use (default: a new one, removed afterwards)")
    parser.add_argument("--keep-index", action="store_true", help="keep the Elasticsearch index after the run")
    parser.add_argument("--work-dir", type=Path, help="where the site, feed and report go (default: a temp dir)")
    parser.add_argument("--json", type=Path, help="also write the report as JSON here")
    parser.add_argument("-v", "--verbose", action="store_true", help="show Scrapy's INFO log")
    args = parser.parse_args(argv)
    with contextlib.ExitStack() as stack:  # a temporary directory of our own goes when the run ends
        work = args.work_dir or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="zhdedup-example-")))
        work.mkdir(parents=True, exist_ok=True)
        return run(args, work, kept=args.work_dir is not None)


def run(args: argparse.Namespace, work: Path, kept: bool) -> int:
    """Generate, serve, crawl and report in ``work``."""
    from examples.site.generate import generate
    from examples.site.serve import start_server

    site_dir, feed = work / "site", work / "items.jsonl"
    manifest = generate(site_dir)
    print(f"generated {manifest['counts']['article_pages']} article pages on "
          f"{manifest['counts']['list_pages'] - 1} sites in {site_dir}", flush=True)

    env = {k: v for k, v in os.environ.items() if not k.startswith("ZHDEDUP_")}  # the flags decide
    env["ZHDEDUP_BACKEND"] = args.backend
    own_index = False
    if args.backend == "elasticsearch":
        own_index = args.es_index is None and not args.keep_index
        index = args.es_index or f"zhdedup-example-{int(time.time())}-{os.getpid()}"
        env.update(ZHDEDUP_ES_URL=args.es_url, ZHDEDUP_ES_INDEX=index,
                   ZHDEDUP_ES_DEAD_LETTER=str(work / "dead-letter.jsonl"))
        print(f"backend: Elasticsearch at {args.es_url}, index {index}", flush=True)
    else:
        print("backend: embedded store (in memory)", flush=True)

    server, base_url = start_server(site_dir)
    started = time.perf_counter()
    try:
        print(f"serving the site at {base_url}; crawling ...", flush=True)
        crawl(base_url + "index.html", feed, env, args.verbose)
    finally:
        server.shutdown()
        server.server_close()
        if own_index:
            drop_es_index(args.es_url, env["ZHDEDUP_ES_INDEX"])
    elapsed = time.perf_counter() - started

    with open(feed, encoding="utf-8") as fh:
        items = [json.loads(line) for line in fh if line.strip()]
    report = build_report(items, manifest)
    where = f"feed: {feed}" if kept else "the site and feed are removed at exit (--work-dir DIR keeps them)"
    print(f"crawl finished in {elapsed:.1f} s, {where}\n")
    print(format_report(report, manifest))
    if args.json:
        args.json.write_text(json.dumps({**asdict(report), "ok": report.ok, "backend": args.backend},
                                        ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
