"""``zhdedup``: the parser of every command (``scan``, ``report``; ``es …`` from es_plugin), its exit codes, ``main``."""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import logging
import os
import sys
from collections.abc import Sequence

from .. import __version__
from ..errors import ConfigError, ZhDedupError
from . import report, scan

logger = logging.getLogger(__name__)


DESCRIPTION = "Chinese exact and near-duplicate detection: a JSONL corpus on disk (scan), an Elasticsearch index (es)."
EXIT_CODES = """exit codes:
  0    done
  1    done, but not all of it: es ingest had documents rejected (dead letters), scan could judge
       no line of its input, es status found the index does not fit, or the output pipe was closed
  2    usage or configuration error, an input that cannot be read (missing, a truncated .gz), or
       an error that stopped the command (one line on stderr)
  130  interrupted (Ctrl-C)"""


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The whole parser; given the command line, only what it runs: ``scan`` and ``report`` do without
    ``es``'s parsers, whose modules (asyncio, es_plugin) were ~0.1 s of their start-up (issue 40)."""
    parser = argparse.ArgumentParser(prog="zhdedup", description=DESCRIPTION, epilog=EXIT_CODES,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help=VERBOSE)
    sub = parser.add_subparsers(dest="command", required=True)
    scan.register(sub)
    report.register(sub)
    if argv is not None and next((a for a in argv if not a.startswith("-")), None) in ("scan", "report"):
        sub.add_parser("es", help="Elasticsearch")  # listed, never run: this command line runs another
    else:
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
        importlib.import_module("es_plugin.commands.cli").register(sub)
        return
    es = sub.add_parser("es", help="Elasticsearch commands (needs the [es] extra)")
    es.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)

    def unavailable(args: argparse.Namespace) -> int:
        raise ConfigError(f"zhdedup es needs the Elasticsearch client ({missing} is not installed): "
                          f"pip install 'scrapy-zhdedup[es]'")

    es.set_defaults(func=unavailable)


class Said(logging.Formatter):
    """A log line as a command-line tool says it, like argparse's ``zhdedup: error: …``: ``zhdedup: warning:
    skipped corpus.jsonl:12: …``; with ``-v`` the logger's name too.  Messages written for a crawl's log
    start with ``zhdedup:`` already (Scrapy names the logger after the level): said once."""

    def __init__(self, verbose: bool) -> None:
        super().__init__()
        self.verbose = verbose

    def formatMessage(self, record: logging.LogRecord) -> str:
        who = f"{record.name}: " if self.verbose else ""
        return f"zhdedup: {record.levelname.lower()}: {who}{record.message.removeprefix('zhdedup: ')}"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser(argv).parse_args(argv)
    said = logging.StreamHandler()
    said.setFormatter(Said(args.verbose))
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, handlers=[said])
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
    except KeyboardInterrupt as exc:  # Ctrl-C: a command that counts its work says how far it got (Interrupted)
        if str(exc):
            print(f"zhdedup: {exc}", file=sys.stderr)
        return 130

