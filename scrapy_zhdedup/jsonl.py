"""Streaming reader for the ``{"id": ..., "text"|"html": ...}`` JSONL input of ``zhdedup scan``/``es ingest``.

Bad lines are reported with file and line number and skipped (or raised with ``strict``), so
one broken record never costs the rest of a 100k-line file.  A record is bad when it is not a
JSON object or has no usable id or text (validate.py says what usable means).
"""

from __future__ import annotations

import gzip
import io
import json
import logging
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from .errors import EmptyTextError, InvalidDocumentError, ZhDedupError
from .validate import check_id, check_unicode

logger = logging.getLogger(__name__)

STDIN = "-"


class BadRecordError(ZhDedupError, ValueError):
    def __init__(self, path: str, line: int, reason: str) -> None:
        super().__init__(f"{path}:{line}: {reason}")
        self.path, self.line, self.reason = path, line, reason

    @classmethod
    def unjudged(cls, path: str, line: int, exc: Exception) -> BadRecordError:
        """A record read well whose document could not be judged (``scan`` and ``es ingest`` say it alike)."""
        what = "no text to judge" if isinstance(exc, EmptyTextError) else "cannot be judged"
        return cls(path, line, f"{what} ({exc})")

    def __reduce__(self) -> tuple[type[BadRecordError], tuple[str, int, str]]:
        """Picklable, so it can travel through the worker processes in its line's place."""
        return type(self), (self.path, self.line, self.reason)


@dataclass(frozen=True)
class Record:
    path: str
    line: int
    doc_id: str
    text: str | None
    html: str | None
    data: dict[str, Any]


def parse_line(raw: str, path: str, line: int) -> Record:
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise BadRecordError(path, line, f"not JSON ({exc.msg})") from None
    if not isinstance(data, dict):
        raise BadRecordError(path, line, "not a JSON object")
    text, html = data.get("text"), data.get("html")
    try:
        doc_id = check_id(data.get("id"))
        if not isinstance(text, str) and not isinstance(html, str):
            raise InvalidDocumentError('no "text" or "html" string')
        for name in ("text", "html"):
            if isinstance(data.get(name), str):
                check_unicode(f'"{name}"', data[name])
    except InvalidDocumentError as exc:
        raise BadRecordError(path, line, str(exc)) from None
    return Record(path, line, doc_id, text if isinstance(text, str) else None,
                  html if isinstance(html, str) else None, data)


def read_records(fh: IO[str], path: str, *, strict: bool = False, start_line: int = 0,
                 errors: list[BadRecordError] | None = None) -> Iterator[Record]:
    """Yield records from an open text file; bad lines go to ``errors`` (and the log) unless strict."""
    for number, raw in enumerate(fh, start=1):
        if number <= start_line or not raw.strip():
            continue
        try:
            yield parse_line(raw, path, number)
        except BadRecordError as exc:
            if strict:
                raise
            logger.warning("skipped %s", exc)
            if errors is not None:
                errors.append(exc)


def open_input(path: str | Path) -> IO[str]:
    """``-`` is standard input; ``*.gz`` is gunzipped.  UTF-8 with or without BOM; undecodable bytes
    become U+FFFD rather than ending the run (such a line then fails as JSON, with its number)."""
    if str(path) == STDIN:
        return io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8-sig", errors="replace")
    if str(path).endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8-sig", errors="replace")
    return open(path, encoding="utf-8-sig", errors="replace")


def input_name(path: str | Path) -> str:
    """How an input is named in messages and checkpoints."""
    return "<stdin>" if str(path) == STDIN else str(path)
