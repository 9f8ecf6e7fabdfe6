"""Streaming reader for the ``{"id": ..., "text"|"html": ...}`` JSONL input of ``zhdedup scan``/``es ingest``.

Bad lines are reported with file and line number and skipped (or raised with ``strict``), so
one broken record never costs the rest of a 100k-line file.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from .errors import ZhDedupError

logger = logging.getLogger(__name__)


class BadRecordError(ZhDedupError, ValueError):
    def __init__(self, path: str, line: int, reason: str) -> None:
        super().__init__(f"{path}:{line}: {reason}")
        self.path, self.line, self.reason = path, line, reason


@dataclass(frozen=True)
class Record:
    path: str
    line: int
    doc_id: str
    text: str | None
    html: str | None
    data: dict[str, Any]


def usable_id(value: Any) -> str | None:
    """A document id as text: a non-empty string or a number, never an object, list or boolean."""
    if value is None or isinstance(value, (dict, list, bool)) or str(value) == "":
        return None
    return str(value)


def parse_line(raw: str, path: str, line: int) -> Record:
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise BadRecordError(path, line, f"not JSON ({exc.msg})") from None
    if not isinstance(data, dict):
        raise BadRecordError(path, line, "not a JSON object")
    doc_id = usable_id(data.get("id"))
    if doc_id is None:
        raise BadRecordError(path, line, "no usable \"id\" (string or number)")
    text, html = data.get("text"), data.get("html")
    if not isinstance(text, str) and not isinstance(html, str):
        raise BadRecordError(path, line, "no \"text\" or \"html\" string")
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


def open_input(path: Path) -> IO[str]:
    """UTF-8 (with or without BOM); undecodable bytes become U+FFFD rather than ending the run."""
    return open(path, encoding="utf-8-sig", errors="replace")
