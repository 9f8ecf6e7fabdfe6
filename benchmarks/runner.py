"""``python -m benchmarks NAME [options]``: parse, describe the machine, run, print the tables, save the results.

Each benchmark module declares ``BENCHMARKS``: what it measures (its docstring), its own options and a
``run`` that returns a :class:`Result`.  Everything around a run is here, once: the options every
benchmark has (``--out``, and ``--url`` for those that need an Elasticsearch node), the machine and
node description printed first, the instrument's self-check, the tables printed last, and
``benchmarks/results/NAME.json`` written (overwritten: the file is the data of the latest run; its
history is git's).  ``python -m benchmarks`` lists the benchmarks, one line each.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks import common

RESULTS_DIR = Path(__file__).resolve().parent / "results"
# The modules that declare benchmarks, in the order of the list.
MODULES = ("fingerprint", "throughput", "scan_parts", "crawl", "lookup", "caches", "memory", "store_peaks",
           "store_log", "extract", "accuracy", "recall", "rule_parts", "cross_links", "sketch_size", "truth_on_synthetic",
           "es_agreement", "es_lookup", "es_sizing", "es_writers", "es_ingest", "es_flavours")


@dataclass
class Result:
    """What a run measured (saved as ``results``) and the Markdown tables it printed (saved beside)."""

    results: Any
    tables: list[str]
    notes: list[str] = field(default_factory=list)  # lines printed after the tables


def _no_options(parser: argparse.ArgumentParser) -> None:
    pass


@dataclass(frozen=True)
class Benchmark:
    """One benchmark.  ``about``'s first line is its line in the list, the whole its ``--help``."""

    name: str
    about: str
    run: Callable[[argparse.Namespace], Result]
    options: Callable[[argparse.ArgumentParser], None] = _no_options
    node: str = ""  # "required" or "optional": an Elasticsearch node at --url, which the runner describes
    check: Callable[[], None] | None = None  # verifies what the benchmark measures with, before it runs

    @property
    def title(self) -> str:
        return self.about.strip().split("\n", 1)[0]


def registry() -> dict[str, Benchmark]:
    found: dict[str, Benchmark] = {}
    for module in MODULES:
        for benchmark in importlib.import_module(f"benchmarks.{module}").BENCHMARKS:
            found[benchmark.name] = benchmark
    return found


def listing(benchmarks: dict[str, Benchmark]) -> str:
    width = max(map(len, benchmarks))
    lines = [f"  {name:<{width}}  {b.title}{f'  [node {b.node}]' if b.node else ''}" for name, b in benchmarks.items()]
    return ("usage: python -m benchmarks NAME [options]    (python -m benchmarks NAME --help: its options)\n\n"
            "benchmarks ([node]: an Elasticsearch node at --url or $ZHDEDUP_TEST_ES_URL):\n" + "\n".join(lines))


def parser_for(benchmark: Benchmark) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=f"python -m benchmarks {benchmark.name}", description=benchmark.about,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    benchmark.options(parser)
    if benchmark.node:
        parser.add_argument("--url", default=os.environ.get("ZHDEDUP_TEST_ES_URL"),
                            help="the Elasticsearch node (default $ZHDEDUP_TEST_ES_URL; bash scripts/es-node.sh url)")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR / f"{benchmark.name}.json",
                        help=f"results file (default benchmarks/results/{benchmark.name}.json, overwritten)")
    return parser


def write(path: Path, benchmark: Benchmark, info: dict[str, Any], args: argparse.Namespace, argv: Sequence[str],
          result: Result) -> None:
    """The results file: the machine, the arguments, the numbers and the printed tables of this run."""
    path.parent.mkdir(parents=True, exist_ok=True)
    arguments = {k: v for k, v in vars(args).items() if k != "out"}
    payload = {"benchmark": benchmark.name, "machine": info, "args": arguments,
               "load_avg_end": [round(x, 2) for x in os.getloadavg()], "results": result.results,
               "tables": result.tables, "notes": result.notes, "argv": list(argv)}
    path.write_text(json.dumps(payload, ensure_ascii=False, indent=1, default=str) + "\n", encoding="utf-8")
    shown = path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path
    print(f"\nresults written to {shown}")


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    benchmarks = registry()
    if not argv or argv[0] in ("-h", "--help", "list"):
        print(listing(benchmarks))
        return 0
    benchmark = benchmarks.get(argv[0])
    if benchmark is None:
        print(f"no benchmark {argv[0]!r}\n\n{listing(benchmarks)}", file=sys.stderr)
        return 2
    parser = parser_for(benchmark)
    args = parser.parse_args(argv[1:])
    if benchmark.node == "required" and not args.url:
        parser.error("needs an Elasticsearch node: --url URL, or ZHDEDUP_TEST_ES_URL=$(bash scripts/es-node.sh url)")
    if benchmark.check is not None:
        benchmark.check()
    info = common.machine()
    if benchmark.node and args.url:
        info["elasticsearch"] = common.node(args.url)
    print(f"# {benchmark.title}\n{common.describe(info)}\n", flush=True)
    result = benchmark.run(args)
    for table in result.tables:
        print(f"\n{table}")
    for note in result.notes:
        print(note)
    write(args.out, benchmark, info, args, argv, result)
    return 0


def positive(text: str) -> int:
    """An argparse type: a positive integer."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be positive, not {value}")
    return value


def corpus_option(parser: argparse.ArgumentParser, default: Sequence[str] | None = None) -> None:
    """``--corpus``, for the benchmarks on the real corpora of ``corpora.sources`` (default: all of them)."""
    from corpora import sources

    parser.add_argument("--corpus", nargs="+", default=list(default or sources.ALL), choices=sources.ALL,
                        help="corpora (default: %(default)s)")
