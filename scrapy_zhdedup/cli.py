"""``zhdedup``: deduplicate a JSONL corpus on disk (``scan``) and the Elasticsearch side (``es …``)."""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections import Counter
from pathlib import Path
from typing import IO

from .config import DedupConfig
from .engine import Deduper
from .errors import EmptyTextError, ZhDedupError
from .jsonl import BadRecordError, open_input, read_records


def add_dedup_options(parser: argparse.ArgumentParser) -> None:
    """Engine options shared by every command that fingerprints text."""
    d = DedupConfig()
    g = parser.add_argument_group("deduplication")
    g.add_argument("--threshold", type=int, default=d.threshold, help="max Hamming distance of a near repeat (default %(default)s)")
    g.add_argument("--bands", type=int, default=d.bands, help="blocks per fingerprint; 0 = threshold+2")
    g.add_argument("--features", choices=("auto", "words", "chars"), default=d.features)
    g.add_argument("--short-text-chars", type=int, default=d.short_text_chars)
    g.add_argument("--shingle-size", type=int, default=d.shingle_size)
    g.add_argument("--no-t2s", dest="t2s", action="store_false", help="keep traditional characters as they are")
    g.add_argument("--extractor", choices=("lxml", "trafilatura"), default=d.extractor)
    g.add_argument("--no-passages", dest="passages", action="store_false",
                   help="find near repeats through the SimHash bands only")
    g.add_argument("--passage-chars", type=int, default=d.passage_chars)
    g.add_argument("--passage-share", type=float, default=d.passage_share)
    g.add_argument("--passage-threshold", type=int, default=d.passage_threshold)


def dedup_config(args: argparse.Namespace) -> DedupConfig:
    return DedupConfig(threshold=args.threshold, bands=args.bands, features=args.features,
                       short_text_chars=args.short_text_chars, shingle_size=args.shingle_size,
                       traditional_to_simplified=args.t2s, extractor=args.extractor, passages=args.passages,
                       passage_chars=args.passage_chars, passage_share=args.passage_share,
                       passage_threshold=args.passage_threshold)


def progress(total: int, unit: str, desc: str):  # type: ignore[no-untyped-def]
    """A progress bar on a terminal, silence in logs and CI."""
    from tqdm import tqdm

    return tqdm(total=total, unit=unit, unit_scale=True, desc=desc, disable=not sys.stderr.isatty(), file=sys.stderr)


def cmd_scan(args: argparse.Namespace) -> int:
    deduper = Deduper.open(dedup_config(args), args.store)
    counts: Counter[str] = Counter()
    errors: list[BadRecordError] = []
    started = time.perf_counter()
    out: IO[str] = sys.stdout if args.output in (None, "-") else open(args.output, "w", encoding="utf-8")
    try:
        with open_input(args.input) as fh, progress(args.input.stat().st_size, "B", "scan") as bar:
            last = 0
            for rec in read_records(fh, str(args.input), strict=args.strict, errors=errors):
                try:
                    verdict = deduper.check(rec.doc_id, text=rec.text, html=rec.html)
                except EmptyTextError as exc:
                    bad = BadRecordError(rec.path, rec.line, f"no text to judge ({exc})")
                    if args.strict:
                        raise bad from None
                    logging.warning("skipped %s", bad)
                    errors.append(bad)
                    continue
                counts[verdict.status] += 1
                out.write(json.dumps(verdict.record(), ensure_ascii=False) + "\n")
                pos = fh.buffer.tell() if hasattr(fh, "buffer") else 0
                bar.update(max(0, pos - last))
                last = pos
    finally:
        if out is not sys.stdout:
            out.close()
        deduper.close()
    elapsed = time.perf_counter() - started
    judged = sum(counts.values())
    print(
        f"zhdedup scan: {judged} judged ({counts['unique']} unique, {counts['exact']} exact, "
        f"{counts['near']} near), {len(errors)} bad lines skipped, {elapsed:.1f} s, "
        f"{judged / elapsed if elapsed else 0:.0f} docs/s",
        file=sys.stderr,
    )
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="zhdedup", description=__doc__)
    parser.add_argument("-v", "--verbose", action="store_true")
    sub = parser.add_subparsers(dest="command", required=True)

    scan = sub.add_parser("scan", help="judge each JSONL document against all before it")
    scan.add_argument("input", type=Path, help='JSONL, one {"id": ..., "text"|"html": ...} per line')
    scan.add_argument("-o", "--output", help="JSONL verdicts, one per judged input line (default stdout)")
    scan.add_argument("--store", type=Path, help="directory to load/save what was seen, across runs")
    scan.add_argument("--strict", action="store_true", help="stop at the first bad line instead of skipping it")
    add_dedup_options(scan)
    scan.set_defaults(func=cmd_scan)

    from es_plugin.cli import register

    register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    try:
        return int(args.func(args) or 0)
    except (ZhDedupError, ValueError, OSError) as exc:
        print(f"zhdedup: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
