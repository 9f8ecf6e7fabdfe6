"""The errors: one module per package holds them all, each pickles with its data (worker processes send an
item's error back in its place), and each raise names what went wrong with a subclass."""

from __future__ import annotations

import ast
import importlib
import inspect
import pickle
import pkgutil
from pathlib import Path
from typing import Any

import pytest

import es_plugin
import es_plugin.errors
import scrapy_zhdedup
import scrapy_zhdedup.errors
from es_plugin.errors import (
    BulkInterruptedError,
    CheckpointError,
    ClientMismatchError,
    ClosingError,
    DeadLetterError,
    EsIndexError,
    EsRequestError,
    EsUnavailableError,
    IngestStopped,
    LookupFailedError,
    LookupItemError,
    MissingPrivilegeError,
    WritesRejectedError,
)
from scrapy_zhdedup.errors import (
    BadRecordError,
    ConfigError,
    EmptyTextError,
    InputError,
    InvalidDocumentError,
    JunkError,
    LayoutMismatchError,
    OutputError,
    StoreError,
    StoreFailedError,
    StoreLockedError,
    StoreUnavailableError,
    ZhDedupError,
)

ERRORS: list[ZhDedupError] = [
    ConfigError("ZHDEDUP_MODE must be 'drop' or 'annotate', not 'x'"),
    InvalidDocumentError("document ids may not contain NUL characters"),
    EmptyTextError("no text left"),
    JunkError("binary data, not text: 56% of its characters are control or undecodable bytes"),
    InputError("in.jsonl: no such file or directory"),
    InputError.unreadable("in.jsonl.gz", 12, EOFError("Compressed file ended before the end-of-stream marker")),
    BadRecordError("in.jsonl", 3, "not a JSON object"),
    OutputError("out/x.jsonl: no such directory out"),
    StoreError(Path("store/index.npz"), "unreadable index file"),
    StoreLockedError(Path("store"), "4242"),
    LayoutMismatchError("index built with ZHDEDUP_THRESHOLD=3"),
    StoreFailedError("store/log.bin: cannot remember 'a'"),
    StoreUnavailableError("not judged now"),
    EsUnavailableError("Elasticsearch at http://127.0.0.1:1 is not reachable"),
    LookupFailedError("looking up 'a' failed after 5 retries"),
    LookupItemError({"type": "es_rejected_execution_exception"}, 429),
    MissingPrivilegeError("es status needs read on docs"),
    EsRequestError("Elasticsearch at http://127.0.0.1:9200 answered 400: bad query"),
    EsIndexError("docs: no such index"),
    WritesRejectedError("reconcile: 1 of 2 changes were rejected"),
    BulkInterruptedError("CancelledError()"),
    ClosingError("a request to Elasticsearch ended as the client was closing (no HTTP status: the connection failed)"),
    DeadLetterError("the dead-letter file dead.jsonl cannot be written"),
    CheckpointError("ckpt.json: unreadable checkpoint"),
    IngestStopped("Elasticsearch stopped taking documents"),
    ClientMismatchError("the server is OpenSearch 2.19.2; its client is not installed"),
]
PACKAGES = (scrapy_zhdedup, es_plugin)


def _modules() -> list[Any]:
    """Every module of both packages, imported (``__main__`` runs the command line: left out)."""
    found = list(PACKAGES)
    for package in PACKAGES:
        for info in pkgutil.walk_packages(package.__path__, f"{package.__name__}."):
            if not info.name.endswith("__main__"):
                found.append(importlib.import_module(info.name))
    return found


def test_every_error_class_is_in_its_package_errors_module_and_listed_here() -> None:
    defined = {cls for module in _modules() for _, cls in inspect.getmembers(module, inspect.isclass)
               if issubclass(cls, ZhDedupError) and cls.__module__ == module.__name__}
    assert {cls.__module__ for cls in defined} == {"scrapy_zhdedup.errors", "es_plugin.errors"}
    assert defined - {ZhDedupError} == {type(error) for error in ERRORS}


@pytest.mark.parametrize("error", ERRORS, ids=lambda e: type(e).__name__)
def test_every_error_pickles_with_its_message_and_data(error: ZhDedupError) -> None:
    again = pickle.loads(pickle.dumps(error))
    assert type(again) is type(error)
    assert str(again) == str(error) and again.args == error.args
    assert vars(again) == vars(error)


def test_the_base_error_is_raised_nowhere() -> None:
    """Every raise says what went wrong with a subclass; ``except ZhDedupError`` is fine."""
    made = []
    for package in PACKAGES:
        for path in Path(package.__path__[0]).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "ZhDedupError":
                    made.append(f"{path}:{node.lineno}")
    assert made == []
