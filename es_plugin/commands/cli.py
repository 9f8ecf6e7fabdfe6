"""``zhdedup es …``: install/status, ingest, folded search, batch dedup of an index, reconcile.

Each subcommand is a thin layer over a library function (template, ingest, search, batch,
reconcile), so what the CLI does can also be done from Python.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scrapy_zhdedup.cli.progress import progress
from scrapy_zhdedup.cli.report import add_report_options
from scrapy_zhdedup.config import (
    CONNECTION,
    LAYOUT,
    NEAR,
    SEARCH,
    WRITING,
    DedupConfig,
    EsConfig,
    add_options,
    from_args,
)
from scrapy_zhdedup.errors import ConfigError, Interrupted
from scrapy_zhdedup.esurl import redact
from scrapy_zhdedup.index.bands import BandLayout
from scrapy_zhdedup.workers import add_workers_option

from ..backend.groupcommit import DEFAULT_CONCURRENCY
from ..errors import EsIndexError, EsRequestError
from ..index.chinese import SearchText

if TYPE_CHECKING:
    from elasticsearch import Elasticsearch

    from ..privileges import Needs


def register(sub: argparse._SubParsersAction) -> None:
    """Every subcommand names its index with ``--index`` (default ``$ZHDEDUP_ES_INDEX``, else
    zhdedup-docs) and offers only the options that act in it."""
    es = sub.add_parser("es", help="Elasticsearch", description="Elasticsearch commands; each names its index with --index.")
    esub = es.add_subparsers(dest="es_command", required=True)

    _setup_commands(esub)  # in this order in --help
    _writing_commands(esub)
    _reading_commands(esub)
    _repair_commands(esub)
    listed = next(a for a in sub._choices_actions if a.dest == "es")  # its line in zhdedup --help names them all
    listed.help = f"Elasticsearch: {', '.join(esub.choices)}"


def _setup_commands(esub: argparse._SubParsersAction) -> None:
    """What sets an index up and tells its state: install, status."""
    p = esub.add_parser("install", help="put the index template (idempotent, versioned) and create the index")
    _options(p, dedup=(LAYOUT,), search=True)
    p.add_argument("--mapping", type=Path, help="JSON file: mapping properties of the documents' own fields")
    p.add_argument("--shards", type=int, default=1, help="primary shards of a new index (default %(default)s)")
    p.set_defaults(func=_es_errors(cmd_install))

    p = esub.add_parser("status", help="installed template, band layout, document and cluster counts")
    _options(p, dedup=(LAYOUT,))
    p.add_argument("--json", action="store_true", help="print the status as JSON")
    p.set_defaults(func=_es_errors(cmd_status))


def _writing_commands(esub: argparse._SubParsersAction) -> None:
    """What judges and stores documents: ingest, replay."""
    p = esub.add_parser("ingest", help="load JSONL files or directories of HTML pages, deduplicated")
    p.add_argument("inputs", nargs="+", type=Path, metavar="INPUT",
                   help='JSONL ({"id": ..., "text"|"html": ...} per line) or a directory of saved pages')
    _options(p, dedup=None, search=True, writing=True)
    p.add_argument("--mode", choices=("annotate", "drop"), default="annotate",
                   help="annotate: store duplicates too, marked (default; folded search needs them); "
                        "drop: store first copies only")
    p.add_argument("--checkpoint-dir", type=Path, default=Path(".zhdedup-checkpoints"),
                   help="where the per-input resume checkpoints live (default %(default)s)")
    p.add_argument("--restart", action="store_true", help="ignore existing checkpoints and read inputs from the start")
    p.add_argument("--concurrency", type=int, default=DEFAULT_CONCURRENCY,
                   help="documents looked up in one request, one request after another: the verdicts "
                        "are those of input order for any number (default %(default)s)")
    add_workers_option(p)
    p.add_argument("--strict", action="store_true", help="stop at the first bad record instead of skipping it")
    p.set_defaults(func=_es_errors(cmd_ingest))

    p = esub.add_parser("replay", help="judge and store again the documents of a dead-letter file")
    p.add_argument("dead_letter", type=Path, metavar="DEAD_LETTER", help="the dead-letter JSONL file")
    _options(p, dedup=None, search=True, writing=True, dead_letter=False)
    p.add_argument("--mode", choices=("annotate", "drop"), default=None,
                   help="annotate: store duplicates too, marked; drop: store first copies only (default: the mode "
                        "of the run that wrote the lines)")
    p.add_argument("--output", type=Path, default=None, metavar="FILE",
                   help="append the items a crawl could not judge, and so did not deliver, to FILE as JSON lines "
                        "once judged (drop mode: the first copies), and mark them delivered in the crawl's ledger")
    p.add_argument("--html-field", default="html",
                   help="document field holding the page, judged instead of the text (default %(default)s)")
    p.set_defaults(func=_es_errors(cmd_replay))


def _reading_commands(esub: argparse._SubParsersAction) -> None:
    """What reads an index: search, report."""
    p = esub.add_parser("search", help="search with near-duplicates folded into one hit per cluster")
    p.add_argument("query", help="query text (segmented like the stored text), or a JSON query clause if it "
                                 "starts with '{'")
    _options(p, dedup=(), search=True)
    p.add_argument("--page", type=int, default=1, help="page of groups to show (default %(default)s)")
    p.add_argument("--size", type=int, default=10, help="groups per page (default %(default)s)")
    p.add_argument("--inner-hits", type=int, default=0, metavar="N", help="show up to N folded duplicates per hit")
    p.add_argument("--fields", default=None,
                   help="comma-separated fields to search and show (default: title and --text-field)")
    p.add_argument("--all", action="store_true", help="every group as JSONL, in cluster order (no window limit)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("--print-body", action="store_true",
                   help="print the request as a curl command (its JSON body also works in Kibana) and exit")
    p.set_defaults(func=_es_errors(cmd_search))

    p = esub.add_parser("report", help="one HTML file showing what the index folded and why")
    _options(p, dedup=(), search=True, analysis=False)
    add_report_options(p)
    p.set_defaults(func=_es_errors(cmd_report))


def _repair_commands(esub: argparse._SubParsersAction) -> None:
    """What judges or repairs an index in place: dedup-index, reconcile."""
    p = esub.add_parser("dedup-index", help="fingerprint and cluster an existing index in place")
    _options(p, dedup=None, search=True, analysis=False)
    p.add_argument("--html-field", default=None, help="judge this field's HTML when present (before --text-field)")
    p.add_argument("--id-field", default=None, help="field naming the document (default: _id)")
    p.add_argument("--checkpoint", type=Path, default=None,
                   help="resume file (default .zhdedup-checkpoints/dedup-index-INDEX.json)")
    p.add_argument("--restart", action="store_true",
                   help="ignore the resume file and read from the start (documents judged before keep their verdicts)")
    p.add_argument("--batch-size", type=int, default=500,
                   help="documents per page and per bulk of updates (default %(default)s)")
    add_workers_option(p)
    p.add_argument("--dry-run", action="store_true", help="judge and report, write nothing")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=_es_errors(cmd_dedup_index))

    p = esub.add_parser("reconcile", help="find and repair documents whose zhdedup fields disagree")
    _options(p, dedup=(LAYOUT, NEAR))
    p.add_argument("--dry-run", action="store_true", help="report only")
    p.add_argument("--delete", action="store_true", help="delete stray documents instead of re-marking them")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=_es_errors(cmd_reconcile))


def _es_errors(command: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Elasticsearch errors become one line naming the node and the reason, like every other CLI error."""

    def run(args: argparse.Namespace) -> int:
        from elastic_transport import TransportError
        from elasticsearch import ApiError

        from ..client import quiet_client_logs

        from_args(EsConfig, args)  # every Elasticsearch setting checked (config.py): one line, before anything starts
        if not getattr(args, "verbose", False):
            quiet_client_logs()
        try:
            return command(args)
        except ApiError as exc:
            error = exc.body.get("error") if isinstance(exc.body, dict) else None
            reason = (error.get("reason") if isinstance(error, dict) else None) or exc.message
            raise EsRequestError(f"Elasticsearch at {redact(args.es_url)} answered {exc.meta.status}: {reason}") from exc
        except TransportError as exc:
            raise EsRequestError(f"Elasticsearch at {redact(args.es_url)} failed: {exc}") from exc

    return run


def _options(p: argparse.ArgumentParser, *, dedup: Collection[str] | None, search: bool = False,
             analysis: bool = True, writing: bool = False, dead_letter: bool = True) -> None:
    """Connection options (from EsConfig, defaults from ``$ZHDEDUP_ES_*``), and those of the engine
    (``dedup``: DedupConfig groups, None for all), of search and of writing where the command uses them."""
    add_options(p, EsConfig, "Elasticsearch connection", groups=(CONNECTION,), environment=True)
    if search:
        add_options(p, EsConfig, "text and search", groups=(SEARCH,), skip=() if analysis else ("es_analysis",),
                    environment=True)
    if writing:
        add_options(p, EsConfig, "Elasticsearch writing", groups=(WRITING,), environment=True,
                    skip=() if dead_letter else ("es_dead_letter",))
    if dedup is None or dedup:
        add_options(p, DedupConfig, "deduplication", groups=dedup)


def _search_text(args: argparse.Namespace) -> SearchText:
    return SearchText(args.es_text_field, getattr(args, "es_analysis", "jieba"))


@contextmanager
def _client(args: argparse.Namespace, needs: Needs) -> Iterator[Elasticsearch]:
    """A client of a node that answers, for a user who has what the command ``needs`` (privileges.py)."""
    from ..client import check_reachable, make_client
    from ..privileges import Access

    client = make_client(from_args(EsConfig, args))
    try:
        check_reachable(client, args.es_url, Access(args.es_index, needs))
        yield client
    finally:
        client.close()


@contextmanager
def _bar(total: int | None, unit: str, desc: str) -> Iterator[Callable[[int], None]]:
    with progress(total, unit, desc) as bar:
        yield bar.update


def _print(data: Any) -> None:
    print(json.dumps(data, ensure_ascii=False, indent=2))


# --- install / status / reconcile -------------------------------------------------------------------


def cmd_install(args: argparse.Namespace) -> int:
    from scrapy_zhdedup.fingerprint_settings import fingerprint_settings

    from ..index.template import install

    user_properties = None
    if args.mapping:
        user_properties = json.loads(args.mapping.read_text(encoding="utf-8"))
        if not isinstance(user_properties, dict):
            raise ConfigError(f"{args.mapping}: expected a JSON object of mapping properties")
        user_properties = user_properties.get("properties", user_properties)
    if args.shards < 1:
        raise ConfigError("--shards must be at least 1")
    from scrapy_zhdedup.index.nearindex import CandidateKeys

    from ..backend.registry import fill
    from ..privileges import INSTALL

    with _client(args, INSTALL) as client:
        dedup = from_args(DedupConfig, args)
        keys = CandidateKeys.from_config(dedup)
        report = install(client, args.es_index, keys.layout, user_properties, shards=args.shards,
                         search=_search_text(args), fingerprint=fingerprint_settings(dedup),
                         fill=lambda index: fill(index, keys))
    print(f"template {report['template']}: {report['template_action']} (version {report['template_version']}); "
          f"index {report['index']}: {report['index_action']}; layout {report['layout']}")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from ..index.template import status
    from ..privileges import STATUS

    with _client(args, STATUS) as client:
        report = status(client, args.es_index, BandLayout.from_config(from_args(DedupConfig, args)))
    if args.json:
        _print(report)
    else:
        print(f"index:     {report['index']} ({'exists' if report['exists'] else 'missing'})")
        installed = (f"version {report['template_version']}" if report["template_version"] is not None
                     else "not installed (only needed to create the index: `zhdedup es install`)")
        print(f"template:  {report['template']} {installed} "
              f"(this package: {report['package_template_version']}, scrapy-zhdedup {report['package_version']})")
        print(f"layout:    index {report['index_layout']}, client {report['client_layout']}")
        print(f"documents: {report['docs']}, clusters: {report['clusters']}, by status: {report['statuses']}")
        print(f"matches:   {'yes' if report['matches'] else 'NO'}" + (f" - {report['problem']}" if report['problem'] else ""))
    return 0 if report["matches"] else 1


def cmd_reconcile(args: argparse.Namespace) -> int:
    from .. import privileges
    from .reconcile import reconcile

    with _client(args, privileges.reconcile(not args.dry_run)) as client, _bar(None, "doc", "reconcile") as bar:
        config = from_args(DedupConfig, args)
        report = reconcile(client, args.es_index, config, apply=not args.dry_run, delete=args.delete, progress=bar)
    if args.json:
        _print(report)
    else:
        print(f"zhdedup es reconcile{' (dry run)' if args.dry_run else ''}: {report['scanned']} read, "
              f"{report['pairs']} missed repeats found ({report['marked']} marked, {report['deleted']} deleted), "
              f"{report['reclustered']} moved to the cluster theirs joined, {report['clusters']} clusters")
    return 0


# --- ingest ------------------------------------------------------------------------------------------


def _count_inputs(inputs: list[Path]) -> int:
    from scrapy_zhdedup.files.inputs import html_files

    total = 0
    for path in inputs:
        if path.is_dir():
            total += len(html_files(path))
        elif path.is_file():
            with path.open("rb") as fh:
                total += sum(chunk.count(b"\n") for chunk in iter(lambda: fh.read(1 << 20), b""))
    return total


def cmd_ingest(args: argparse.Namespace) -> int:
    from .ingest import ingest

    es = from_args(EsConfig, args)
    judged = 0

    with _bar(_count_inputs(args.inputs), "doc", "ingest") as bar:
        def counted(n: int) -> None:
            nonlocal judged
            judged += n
            bar(n)

        try:
            report = ingest(args.inputs, from_args(DedupConfig, args), es, mode=args.mode,
                            checkpoint_dir=args.checkpoint_dir, restart=args.restart, strict=args.strict,
                            concurrency=args.concurrency, workers=args.workers, progress=counted)
        except KeyboardInterrupt:  # Ctrl-C: what was judged is stored and checkpointed, where a rerun resumes
            raise Interrupted.after(judged, resumable=True) from None
    for entry in report["inputs"]:
        if entry.get("skipped_input"):
            print(f"{entry['input']}: already ingested (checkpoint {entry['checkpoint']}; --restart to redo)",
                  file=sys.stderr)
        elif entry["resumed_from"]:
            print(f"{entry['input']}: resumed after position {entry['resumed_from']}", file=sys.stderr)
    print(f"zhdedup es ingest: {report['judged']} judged ({report['unique']} unique, {report['exact']} exact, "
          f"{report['near']} near), {report['already_stored']} already stored, {report['bad']} bad records "
          f"skipped (logged above), {report['seconds']:.1f} s, {report['docs_per_s']:.0f} docs/s, after "
          f"{report['start_up_seconds']:.1f} s starting up -> {report['index']}")
    if report["dead_lettered"]:
        print(f"zhdedup es ingest: {report['dead_lettered']} documents were rejected by Elasticsearch and are in "
              f"{report['dead_letter_file']}; once the cause is fixed, store them with: {report['replay']}",
              file=sys.stderr)
        return 1
    return 0


def cmd_replay(args: argparse.Namespace) -> int:
    from .replay import replay

    report = replay(args.dead_letter, from_args(DedupConfig, args), from_args(EsConfig, args), mode=args.mode,
                    text_field=args.es_text_field, html_field=args.html_field, output=args.output)
    delivered = f"; {report['delivered']} items delivered to {report['output']}" if report["output"] else ""
    print(f"zhdedup es replay: {report['replayed']} documents of {report['index']} in {report['file']}, "
          f"{report['mode']} mode: {report['unique']} unique, {report['exact']} exact, {report['near']} near, "
          f"{report['already_stored']} already stored, {report['bad']} bad, {report['failed']} refused again (kept "
          f"in the file); {report['other_lines']} lines for other indices kept{delivered}")
    return 1 if report["failed"] or report["bad"] else 0


# --- search ------------------------------------------------------------------------------------------


def cmd_search(args: argparse.Namespace) -> int:
    from .search import curl_command, default_fields, folded_query_body, folded_search, iter_folded, page_lines

    query: str | dict[str, Any] = args.query
    if args.query.lstrip().startswith("{"):
        try:
            query = json.loads(args.query)
        except ValueError as exc:
            raise ConfigError(f"the query starts with '{{' but is not a JSON query clause ({exc})") from None
    search = _search_text(args)
    fields = default_fields(search) if args.fields is None else tuple(
        f.strip() for f in args.fields.split(",") if f.strip())
    if args.print_body:
        body = folded_query_body(query, page=args.page, size=args.size, inner_hits=args.inner_hits, fields=fields,
                                 search=search)
        print(curl_command(args.es_url, args.es_index, body))
        return 0
    from ..privileges import SEARCH

    with _client(args, SEARCH) as client:
        if args.all:
            for group in iter_folded(client, args.es_index, query, fields=fields, search=search):
                print(json.dumps(group, ensure_ascii=False))
            return 0
        result = folded_search(client, args.es_index, query, page=args.page, size=args.size,
                               inner_hits=args.inner_hits, fields=fields, search=search)
    if args.json:
        _print(result)
        return 0
    print("\n".join(page_lines(result, fields)))
    return 0


# --- report ----------------------------------------------------------------------------------------------


def cmd_report(args: argparse.Namespace) -> int:
    from scrapy_zhdedup.files.output import check_output
    from scrapy_zhdedup.report.page import write

    from ..privileges import REPORT
    from .report import from_index

    if args.max_clusters < 1:
        raise ConfigError("--max-clusters must be at least 1")
    check_output(args.output, [])
    with _client(args, REPORT) as client:
        if not client.indices.exists(index=args.es_index):
            raise EsIndexError(f"{args.es_index}: no such index")
        findings = from_index(client, args.es_index, args.es_text_field, max_clusters=args.max_clusters)
    findings.traditional_to_simplified = args.traditional_to_simplified
    print(write(findings, args.output, args.max_clusters), file=sys.stderr)
    return 0


# --- dedup-index -------------------------------------------------------------------------------------


def cmd_dedup_index(args: argparse.Namespace) -> int:
    from .. import privileges
    from .dedup_index import dedup_index

    checkpoint = args.checkpoint or Path(".zhdedup-checkpoints") / f"dedup-index-{args.es_index}.json"
    with _client(args, privileges.dedup_index(not args.dry_run)) as client:
        total = client.count(index=args.es_index)["count"]
        with _bar(total, "doc", "dedup-index") as bar:
            report = dedup_index(client, args.es_index, from_args(DedupConfig, args), text_field=args.es_text_field,
                                 html_field=args.html_field, id_field=args.id_field, dry_run=args.dry_run,
                                 checkpoint=checkpoint, batch_size=args.batch_size, workers=args.workers,
                                 progress=bar, restart=args.restart)
    if args.json:
        _print(report)
        return 0
    print(f"zhdedup es dedup-index{' (dry run)' if report['dry_run'] else ''}: {report['judged']} judged "
          f"({report['unique']} unique, {report['exact']} exact, {report['near']} near), {report['loaded']} judged "
          f"before, {report['skipped']} without text, {report['seconds']:.1f} s, {report['docs_per_s']:.0f} docs/s")
    print(f"{report['clusters']} clusters, {report['duplicate_clusters']} with duplicates; largest:")
    for c in report["largest"]:
        print(f"  {c['size']:5d}  {c['cluster']}  e.g. {', '.join(c['examples'])}")
    for doc, why in report["skipped_examples"].items():
        print(f"skipped {doc}: {why}", file=sys.stderr)
    return 0
