"""``zhdedup report``: one HTML file showing what was folded and why (scrapy_zhdedup/report/)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..config import DedupConfig
from ..errors import ConfigError
from ..files.output import check_output


def register(sub: argparse._SubParsersAction) -> None:
    """``zhdedup report`` and its options."""
    report = sub.add_parser("report", help="one HTML file showing what was folded and why (es report: from an index)")
    report.add_argument("verdicts", nargs="?", help="zhdedup scan's output (JSONL verdicts)")
    report.add_argument("--input", help="where the texts are: the scan's input (JSONL, .gz, a directory of pages) "
                                        "or, with --store, the crawl's exported items (JSON lines or a JSON array)")
    report.add_argument("--store", type=Path, help="an embedded store directory (a crawl's JOBDIR/zhdedup, "
                                                   "ZHDEDUP_STORE_DIR, scan --store) instead of verdicts")
    report.add_argument("--id-field", help="field of an input record with the id (default: id; url with --store)")
    report.add_argument("--text-field", default="text", help="field with the text (default %(default)s)")
    report.add_argument("--html-field", default="html", help="field with the page, used first (default %(default)s)")
    add_report_options(report)
    report.add_argument("--extractor", choices=("lxml", "trafilatura"), default="lxml",
                        help="main-text extraction of pages, as the scan did (default %(default)s)")
    report.set_defaults(func=cmd_report)


def cmd_report(args: argparse.Namespace) -> int:
    """One HTML file from scan's verdicts and its input, or from an embedded store and a crawl's items."""
    from ..report.findings import Fields, from_scan, from_store
    from ..report.page import write

    if (args.verdicts is None) == (args.store is None):
        raise ConfigError("give zhdedup scan's verdicts (with --input, its input) or --store DIR (with --input, "
                          "the crawl's exported items); an Elasticsearch index: zhdedup es report")
    if args.max_clusters < 1:
        raise ConfigError("--max-clusters must be at least 1")
    check_output(args.output, [p for p in (args.verdicts, args.input) if p])
    fields = Fields(args.id_field or ("url" if args.store else "id"), args.text_field, args.html_field)
    if args.store is not None:
        findings = from_store(args.store, args.input, fields, max_clusters=args.max_clusters)
    elif args.input is None:
        raise ConfigError("--input is required with scan's verdicts: the scan's input, whose texts the report "
                          f"shows (zhdedup report {args.verdicts} --input CORPUS)")
    else:
        config = DedupConfig(extractor=args.extractor, traditional_to_simplified=args.traditional_to_simplified)
        findings = from_scan(Path(args.verdicts), args.input, fields, max_clusters=args.max_clusters, config=config)
    print(write(findings, args.output, args.max_clusters), file=sys.stderr)
    return 0


def add_report_options(report: argparse.ArgumentParser) -> None:
    """What every report command takes: where it goes and how many clusters it shows."""
    report.add_argument("-o", "--output", default="zhdedup-report.html",
                        help="the HTML file (default %(default)s); open it in any browser, it needs no network")
    report.add_argument("--max-clusters", type=int, default=200,
                        help="largest clusters shown, each repeat beside its original (default %(default)s)")
    report.add_argument("--no-t2s", dest="traditional_to_simplified", action="store_false",
                        help="compare keeping traditional characters, as a scan or an index built with --no-t2s did")
