"""``zhdedup es …`` subcommands."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    es = sub.add_parser("es", help="Elasticsearch: install, status, ingest, search, dedup-index, reconcile")
    es.add_subparsers(dest="es_command", required=True)
