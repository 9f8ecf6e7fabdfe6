"""Small helpers that several test modules need: one copy of each, so that the copies cannot drift apart."""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from es_plugin.backend.elasticsearch_backend import ElasticsearchBackend
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


def gz_cut_after(path: Path, lines: Sequence[Any], readable: int) -> Path:
    """``lines`` as gzipped JSON lines, cut short so that exactly the first ``readable`` lines can be read
    (the file ends at a sync flush after them, before the end-of-stream marker)."""
    import gzip
    import io

    buffer = io.BytesIO()
    with gzip.GzipFile(fileobj=buffer, mode="wb") as gz:
        encoded = [((line if isinstance(line, str) else json.dumps(line, ensure_ascii=False)) + "\n").encode()
                   for line in lines]
        gz.write(b"".join(encoded[:readable]))
        gz.flush()  # Z_SYNC_FLUSH: everything so far decodes from the bytes written so far
        cut = buffer.tell()
        gz.write(b"".join(encoded[readable:]))
    path.write_bytes(buffer.getvalue()[:cut])
    return path


# mounts a tmpfs of $1 at $2, runs the rest, copies what the disk holds to $3 (if given), exits with the run's status
_ON_A_SMALL_DISK = ('mount -t tmpfs -o size="$1" tmpfs "$2" || exit 97; disk=$2; keep=$3; shift 3; "$@"; status=$?; '
                    '[ -z "$keep" ] || cp -a "$disk/." "$keep" || exit 98; exit $status')


@functools.cache
def _mount_namespace() -> list[str] | None:
    """How to run a command in a mount namespace of its own (root, or an unprivileged user namespace)."""
    if shutil.which("unshare") is None:
        return None
    unshare = ["unshare", "--mount"] + ([] if os.geteuid() == 0 else ["--map-root-user"])
    probe = subprocess.run([*unshare, "sh", "-c", 'mount -t tmpfs -o size=4k tmpfs "$0"', "/tmp"],
                           capture_output=True, check=False)
    return unshare if probe.returncode == 0 else None


def on_a_small_disk(cmd: Sequence[str | Path], disk: Path, size: str, keep: Path | None = None) -> list[str]:
    """``cmd`` with a real filesystem of ``size`` (tmpfs, e.g. ``"12k"``) at ``disk``: writes past it fail
    with ENOSPC, as on a full disk.  The mount is private to the command's mount namespace (nobody else
    sees it, nothing stays mounted); what it holds at the end is copied to ``keep``.  Both directories are
    made if missing.  Skips the test where no mount namespace can be made."""
    unshare = _mount_namespace()
    if unshare is None:
        pytest.skip("a small disk needs a mount namespace (unshare --mount, as root or in a user namespace)")
    for path in (disk, keep):
        if path is not None:
            path.mkdir(parents=True, exist_ok=True)
    return [*unshare, "sh", "-c", _ON_A_SMALL_DISK, "sh", size, str(disk), str(keep or ""), *map(str, cmd)]


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
