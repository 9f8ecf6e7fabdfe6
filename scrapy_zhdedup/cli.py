"""``zhdedup``: deduplicate a JSONL corpus on disk (``scan``) and the Elasticsearch side (``es …``)."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import itertools
import json
import logging
import os
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from tqdm import tqdm

from . import __version__
from .config import DedupConfig, add_options, from_args
from .engine import Deduper, Fingerprinter
from .errors import ConfigError, StoreFailedError, ZhDedupError
from .jsonl import STDIN, BadRecordError, Record, input_name, open_input, read_pages, read_records
from .judge import Prepared, judge
from .output import AtomicOutput, check_output
from .workers import Job, PreparePool, add_workers_option, prepare_job

logger = logging.getLogger(__name__)


class _Bar(tqdm):
    """Without tqdm's monitor thread (it only corrects bars updated in large steps): a second thread
    would make the worker pools spawn instead of fork (workers.py)."""

    monitor_interval = 0


def progress(total: int | None, unit: str, desc: str) -> tqdm:
    """A progress bar on a terminal, silence in logs and CI."""
    return _Bar(total=total, unit=unit, unit_scale=True, desc=desc, disable=not sys.stderr.isatty(), file=sys.stderr)


def _in_order(records: Iterator[Record]) -> Iterator[Record | BadRecordError]:
    """The records, then (``--strict``) the bad line in its place, so the lines before it are judged first."""
    try:
        yield from records
    except BadRecordError as exc:
        yield exc


@contextlib.contextmanager
def records(path: str, *, strict: bool = False, errors: list[BadRecordError] | None = None) -> Iterator[Iterator[Record]]:
    """The records of a JSONL input (a file, ``.gz`` or ``-``) or of a directory of saved pages."""
    if path != STDIN and Path(path).is_dir():
        yield read_pages(Path(path), strict=strict, errors=errors)
        return
    with open_input(path) as fh:
        yield read_records(fh, input_name(path), strict=strict, errors=errors)


def _job(line: Record | BadRecordError) -> Job | BadRecordError:
    return (line.doc_id, line.text, line.html) if isinstance(line, Record) else line


def _scan_step(fingerprinter: Fingerprinter, job: Job | BadRecordError) -> Prepared:
    """The workers' step (a bad line passes through as its own error, keeping its place)."""
    if isinstance(job, BadRecordError):
        raise job
    return prepare_job(fingerprinter, job)


def cmd_scan(args: argparse.Namespace) -> int:
    """Judge every line; exit 1 when the input had lines but none could be judged.

    The ``--workers`` processes clean and fingerprint; this process judges, in input order, so the
    verdicts do not depend on their number.
    """
    check_output(args.output, [args.input])
    config = from_args(DedupConfig, args)
    counts: Counter[str] = Counter()
    errors: list[BadRecordError] = []
    opened = time.perf_counter()
    name = input_name(args.input)
    # First: nothing open for workers to inherit.  Judging needs a document's hash and features, not its text.
    with PreparePool(config, _scan_step, args.workers, fork=True, text=False) as pool:
        started = time.perf_counter()  # the dictionaries are loaded, the workers ready: start-up is over
        deduper = Deduper.open(config, args.store)  # locks the store: a second writer fails here
        try:
            with (records(args.input, strict=args.strict, errors=errors) as read, AtomicOutput(args.output) as out,
                  progress(None, "doc", "scan") as bar):
                lines, jobs = itertools.tee(_in_order(read))
                for line, prepared in zip(lines, pool.map(_job(line) for line in jobs)):
                    if isinstance(line, BadRecordError):  # --strict: every line before it was judged
                        raise line
                    if isinstance(prepared, Exception):
                        bad = BadRecordError.unjudged(line.path, line.line, prepared)
                        if args.strict:
                            raise bad from None
                        logger.warning("skipped %s", bad)
                        errors.append(bad)
                        continue
                    verdict = judge(prepared, deduper.store)
                    counts[verdict.status] += 1
                    if verdict.rerun:
                        counts[f"rerun_{verdict.rerun}"] += 1
                    out.write(json.dumps(verdict.record(), ensure_ascii=False) + "\n")
                    bar.update(1)
        except BaseException:
            with contextlib.suppress(StoreFailedError):  # a full disk fails the snapshot too: the first error says more
                deduper.close()
            raise
        deduper.close()
    if deduper.store.bloom_false_positives:
        logger.info("zhdedup scan: the Bloom filter said 'seen' for %d new texts (false positives)",
                     deduper.store.bloom_false_positives)
    elapsed = time.perf_counter() - started
    judged = counts["unique"] + counts["exact"] + counts["near"]
    reruns = ""
    if counts["rerun_same"] or counts["rerun_changed"]:
        reruns = (f"; {counts['rerun_same']} judged before (stored verdicts), "
                  f"{counts['rerun_changed']} changed since (judged as new versions)")
    print(
        f"zhdedup scan: {judged} judged ({counts['unique']} unique, {counts['exact']} exact, "
        f"{counts['near']} near){reruns}, {len(errors)} bad lines skipped, {elapsed:.1f} s, "
        f"{judged / elapsed if elapsed else 0:.0f} docs/s, after {started - opened:.1f} s starting up",
        file=sys.stderr,
    )
    if errors and not judged:
        print(f"zhdedup scan: no line of {name} could be judged (first: {errors[0]})", file=sys.stderr)
        return 1
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    """One HTML file from scan's verdicts and its input, or from an embedded store and a crawl's items."""
    from .report import Fields, from_scan, from_store
    from .reporthtml import write

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
        raise ConfigError("--input: the scan's input, whose texts the report shows")
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


DESCRIPTION = "Chinese exact and near-duplicate detection: a JSONL corpus on disk (scan), an Elasticsearch index (es)."
EXIT_CODES = """exit codes:
  0    done
  1    done, but not all of it: es ingest had documents rejected (dead letters), scan could judge
       no line of its input, es status found the index does not fit, or the output pipe was closed
  2    usage or configuration error, an input that cannot be read (missing, a truncated .gz), or
       an error that stopped the command (one line on stderr)
  130  interrupted (Ctrl-C)"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="zhdedup", description=DESCRIPTION, epilog=EXIT_CODES,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help=VERBOSE)
    sub = parser.add_subparsers(dest="command", required=True)

    scan = sub.add_parser("scan", help="judge each JSONL document against all before it")
    scan.add_argument("input", help='JSONL, one {"id": ..., "text"|"html": ...} per line ("-" reads standard '
                                    "input, *.gz is gunzipped), or a directory of saved pages (*.html, its path "
                                    "below the directory as id)")
    scan.add_argument("-o", "--output", help="JSONL verdicts, one per judged input line (default stdout); written "
                                             "to a temporary file and renamed when the run ends")
    scan.add_argument("--store", type=Path, help="directory that remembers what was seen, across runs (crash-safe, "
                                                 "one writer at a time); an id judged before gets its stored verdict")
    scan.add_argument("--strict", action="store_true", help="stop at the first bad line instead of skipping it")
    add_workers_option(scan)
    add_options(scan, DedupConfig, "deduplication")
    scan.set_defaults(func=cmd_scan)

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
    report.add_argument("--no-t2s", dest="traditional_to_simplified", action="store_false",
                        help="keep traditional characters, as a scan with --no-t2s did")
    report.set_defaults(func=cmd_report)

    _mount_es(sub)
    _verbose_anywhere(parser, VERBOSE)
    return parser


VERBOSE = "log progress and the Elasticsearch client's requests, and the traceback of an error"


def _verbose_anywhere(parser: argparse.ArgumentParser, help_text: str) -> None:
    """``-v`` after a subcommand too (``zhdedup scan x -v``, ``zhdedup es status -v``); SUPPRESS leaves
    the top-level default alone when a subcommand does not get it."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for command in action.choices.values():
                if "-v" not in command._option_string_actions:
                    command.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS,
                                         help=help_text)
                _verbose_anywhere(command, help_text)


def _mount_es(sub: argparse._SubParsersAction) -> None:
    """``zhdedup es …`` lives in es_plugin, which depends on this package, so it is found by name.
    The client itself is imported only by an ``es`` command (0.4 s that ``scan`` does not pay)."""
    missing = next((name for name in ("elasticsearch", "elastic_transport") if importlib.util.find_spec(name) is None),
                   None)
    if missing is None:
        importlib.import_module("es_plugin.cli").register(sub)
        return
    es = sub.add_parser("es", help="Elasticsearch commands (needs the [es] extra)")
    es.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)

    def unavailable(args: argparse.Namespace) -> int:
        raise ZhDedupError(f"zhdedup es needs the Elasticsearch client ({missing} is not installed): "
                           f"pip install 'scrapy-zhdedup[es]'")

    es.set_defaults(func=unavailable)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    try:
        return int(args.func(args) or 0)
    except BrokenPipeError:  # `zhdedup … | head`: stop quietly, the Python-docs way
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so the interpreter's final flush of stdout cannot fail again
        return 1
    except (ZhDedupError, OSError) as exc:  # anything else is a bug: its traceback is shown
        if args.verbose:
            logger.exception("zhdedup: error")
        print(f"zhdedup: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
