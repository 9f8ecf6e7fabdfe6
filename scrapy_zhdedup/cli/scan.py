"""``zhdedup scan``: judge every document of a JSONL corpus or a directory of pages, in input order."""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import logging
import signal
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from types import FrameType

from ..config import DedupConfig, add_options, from_args
from ..deduper import Deduper
from ..errors import BadRecordError, Interrupted, StoreFailedError
from ..files.inputs import STDIN, Damage, Line, Record, input_name, open_input, parse_line, read_lines, read_pages, skip
from ..files.output import AtomicOutput, check_output
from ..model import Prepared
from ..similarity.fingerprinter import Fingerprinter
from ..workers import Job, PreparePool, add_workers_option, prepare_job
from .progress import progress

logger = logging.getLogger(__name__)
_VERDICT_LINE = json.JSONEncoder(ensure_ascii=False)  # json.dumps with an argument makes one per call (~2 µs)


def register(sub: argparse._SubParsersAction) -> None:
    """``zhdedup scan`` and its options."""
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


def _in_order(records: Iterator[Line | Record]) -> Iterator[Line | Record | BadRecordError]:
    """The records, then (``--strict``) the bad page in its place, so the pages before it are judged first."""
    try:
        yield from records
    except BadRecordError as exc:
        yield exc


@contextlib.contextmanager
def records(path: str, *, strict: bool = False,
            errors: list[BadRecordError] | None = None) -> Iterator[Iterator[Line] | Iterator[Record]]:
    """The lines of a JSONL input (a file, ``.gz`` or ``-``), unparsed, or the records of a directory of saved
    pages."""
    if path != STDIN and Path(path).is_dir():
        yield read_pages(Path(path), strict=strict, errors=errors)
        return
    with open_input(path) as fh:
        yield read_lines(fh, input_name(path))


def _job(item: Line | Record | BadRecordError) -> Line | Job | BadRecordError:
    return Job(item.doc_id, item.text, item.html) if isinstance(item, Record) else item


def _scan_step(fingerprinter: Fingerprinter, job: Line | Job | BadRecordError) -> Prepared:
    """The workers' step: a line is parsed there (its BadRecordError, if it is not a record, comes back in its
    place); a bad page passes through as its own error, keeping its place."""
    if isinstance(job, BadRecordError):
        raise job
    if isinstance(job, Line):  # parse_line checked the id and the text: not checked twice; no text is stored
        record = parse_line(job.raw, job.path, job.line)
        return fingerprinter.prepare_checked(record.doc_id, text=record.text, html=record.html, written=False)
    return prepare_job(fingerprinter, job)


class BetweenDocuments:
    """Ctrl-C lands between two documents: one judged meanwhile is stored, printed and counted first, so
    "interrupted after N documents" is what the output holds (where it fell, the count was one off)."""

    def __init__(self) -> None:
        self.busy = self.pending = False

    def _sigint(self, signum: int, frame: FrameType | None) -> None:
        if not self.busy:
            raise KeyboardInterrupt
        self.pending = True

    @contextlib.contextmanager
    def caught(self) -> Iterator[None]:
        """SIGINT goes through :meth:`_sigint` meanwhile (only the main thread may set a handler)."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = signal.signal(signal.SIGINT, self._sigint)
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, previous if previous is not None else signal.default_int_handler)

    @contextlib.contextmanager
    def deferred(self) -> Iterator[None]:
        self.busy = True
        try:
            yield
        finally:
            self.busy = False
        if self.pending:
            raise KeyboardInterrupt


def cmd_scan(args: argparse.Namespace) -> int:
    """Judge every line; exit 1 when the input had lines but none could be judged.

    The ``--workers`` processes parse the lines, clean and fingerprint; this process reads the lines and judges,
    in input order, so the verdicts do not depend on their number.
    """
    check_output(args.output, [args.input])
    config = from_args(DedupConfig, args)
    counts: Counter[str] = Counter()
    errors: list[BadRecordError] = []
    opened = time.perf_counter()
    name = input_name(args.input)
    unit = "page" if args.input != STDIN and Path(args.input).is_dir() else "line"  # what a bad record is
    damage = Damage()
    ctrl_c = BetweenDocuments()
    # First: nothing open for workers to inherit.  Judging needs a document's hash and features, not its text.
    try:
        with PreparePool(config, _scan_step, args.workers, fork=True, text=False) as pool:
            started = time.perf_counter()  # the dictionaries are loaded, the workers ready: start-up is over
            deduper = Deduper.open(config, args.store)  # locks the store: a second writer fails here
            try:
                with (records(args.input, strict=args.strict, errors=errors) as read,
                      AtomicOutput(args.output) as out, progress(None, "doc", "scan") as bar, ctrl_c.caught()):
                    lines, jobs = itertools.tee(_in_order(damage.guard(read)))
                    for line, prepared in zip(lines, pool.map(_job(line) for line in jobs)):
                        if isinstance(line, BadRecordError):  # --strict: every page before it was judged
                            raise line
                        if isinstance(prepared, BadRecordError):  # a line that is no record, found by its worker
                            skip(prepared, args.strict, errors)
                            continue
                        if isinstance(prepared, Exception):
                            bad = BadRecordError.unjudged(line.path, line.line, prepared)
                            if args.strict:
                                raise bad from None
                            logger.warning("skipped %s", bad)
                            errors.append(bad)
                            continue
                        with ctrl_c.deferred():  # stored, printed and counted together
                            verdict = deduper.judge_prepared(prepared)
                            out.write(_VERDICT_LINE.encode(verdict.record()) + "\n")
                            counts[verdict.status] += 1
                            if verdict.rerun:
                                counts[f"rerun_{verdict.rerun}"] += 1
                        bar.update(1)
                    damage.check()  # a damaged input stops here, every line read before it judged
            except BaseException:
                with contextlib.suppress(StoreFailedError):  # a full disk fails the snapshot too: the first error says more
                    deduper.close()
                raise
            deduper.close()
    except KeyboardInterrupt:  # Ctrl-C: every verdict printed is in the store (--store), where a rerun resumes
        judged = counts["unique"] + counts["exact"] + counts["near"]
        raise Interrupted.after(judged, resumable=args.store is not None) from None
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
        f"{counts['near']} near){reruns}, {len(errors)} bad {unit}s skipped, {elapsed:.1f} s, "
        f"{judged / elapsed if elapsed else 0:.0f} docs/s, after {started - opened:.1f} s starting up",
        file=sys.stderr,
    )
    if errors and not judged:
        print(f"zhdedup scan: no {unit} of {name} could be judged (first: {errors[0]})", file=sys.stderr)
        return 1
    return 0
