"""Small helpers that several test modules need: one copy of each, so that the copies cannot drift apart."""

from __future__ import annotations

import functools
import json
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from es_plugin.backend import ElasticsearchBackend
from scrapy_zhdedup.config import DedupConfig, EsConfig


class Stats(dict[str, int]):
    """The part of Scrapy's stats collector es_plugin uses (``inc_value``), read back as a plain dict.

    Scrapy's own ``MemoryStatsCollector`` cannot stand in: it is built from a running ``Crawler``.
    """

    def inc_value(self, key: str, count: int = 1, start: int = 0) -> None:
        self[key] = self.get(key, start) + count


def backend(url: str, index: str, tmp_path: Path, *, annotate: bool = True, stats: Stats | None = None,
            **es: Any) -> ElasticsearchBackend:
    """The Elasticsearch backend with default dedup settings, flushed by bulk size (1000) rather than by
    time unless ``es`` says otherwise, fast retries, and its dead-letter file in ``tmp_path``."""
    cfg = EsConfig(es_url=url, es_index=index, es_dead_letter=str(tmp_path / "dead.jsonl"),
                   **{"es_flush_interval": 3600.0, "es_bulk_size": 1000, **es})
    return ElasticsearchBackend(DedupConfig(), cfg, stats=stats, index_duplicates=annotate, backoff_base=0.01)


class Interrupt(Exception):
    """What :func:`interrupt_after` raises: a crash (or Ctrl-C) at a chosen point of a resumable run."""


def interrupt_after(n: int, seen: list[int]) -> Callable[[int], None]:
    """A ``progress`` callback that appends each report to ``seen`` and raises :class:`Interrupt` once
    ``seen`` holds ``n`` (``seen`` may be shared by several runs, to count what all of them judged)."""

    def progress(k: int) -> None:
        seen.append(k)
        if len(seen) == n:
            raise Interrupt

    return progress


def write_jsonl(path: Path, lines: Sequence[Any]) -> Path:
    """One JSON object per line; a ``str`` is written as it is (for broken lines)."""
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line, ensure_ascii=False)) + "\n"
                            for line in lines), encoding="utf-8")
    return path


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def serving(root: Path) -> Iterator[str]:
    """The files under ``root`` over HTTP on 127.0.0.1 (no request log); yields the base URL, ending in ``/``."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
