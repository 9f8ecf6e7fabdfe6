"""The inputs of ``zhdedup scan``/``es ingest``/``report``: ``{"id": ..., "text"|"html": ...}`` JSONL,
streamed, and directories of saved pages.

Bad lines are reported with file and line number and skipped (or raised with ``strict``), so
one broken record never costs the rest of a 100k-line file.  A record is bad when it is not a
JSON object or has no usable id or text (validate.py says what usable means).  A file that cannot be
read on (a truncated ``.gz``) is not a bad line: it stops the command with :class:`InputError`,
naming the file and the last line read, once every line read before it has been judged
(:class:`Damage`).
"""

from __future__ import annotations

import io
import json
import logging
import re
import sys
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, NamedTuple, TypeVar

from ..errors import BadRecordError, InputError, InvalidDocumentError
from ..text.clean import decode_html
from ..text.validate import check_id, check_unicode

logger = logging.getLogger(__name__)

T = TypeVar("T")
STDIN = "-"
HTML_SUFFIXES = (".html", ".htm", ".shtml", ".xhtml")
_TITLE = re.compile(r"<title[^>]*>(.*?)</title>", re.I | re.S)


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
    except json.JSONDecodeError as exc:  # msg alone can end in "at" (Invalid control character at)
        raise BadRecordError(path, line, f"not JSON ({exc.msg.removesuffix(' at')} at column {exc.colno})") from None
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


class Line(NamedTuple):
    """A line of an input not yet parsed (:func:`parse_line`): what ``zhdedup scan`` hands its workers, so
    the JSON is decoded and checked there, not in the one process that judges."""

    path: str
    line: int
    raw: str


def read_lines(fh: IO[str], path: str, *, start_line: int = 0) -> Iterator[Line]:
    """The numbered lines of an open text file after ``start_line``, blank ones left out, unparsed.
    Raises InputError if the file cannot be read to its end."""
    for number, raw in _lines(fh, path):
        if number > start_line and raw and not raw.isspace():  # not raw.strip(): no copy of the line
            yield Line(path, number, raw)


def read_records(fh: IO[str], path: str, *, strict: bool = False, start_line: int = 0,
                 errors: list[BadRecordError] | None = None) -> Iterator[Record]:
    """Yield records from an open text file; bad lines go to ``errors`` (and the log) unless strict.
    Raises InputError if the file cannot be read to its end."""
    for line in read_lines(fh, path, start_line=start_line):
        try:
            yield parse_line(line.raw, path, line.line)
        except BadRecordError as exc:
            skip(exc, strict, errors)


def _lines(fh: IO[str], path: str) -> Iterator[tuple[int, str]]:
    """Numbered lines; a read that fails (gzip's EOFError, zlib.error, OSError) is an InputError."""
    lines, number = iter(fh), 0
    while True:
        try:
            raw = next(lines)
        except StopIteration:
            return
        except (EOFError, OSError, zlib.error) as exc:
            raise InputError.unreadable(path, number, exc) from None
        number += 1
        yield number, raw


class Damage:
    """Where an input could not be read on.  :meth:`guard` ends the records there as if the input ended,
    so whatever reads ahead of the judging (worker processes, a lookup window) hands on every record
    read before it; :meth:`check` then raises the error, once the caller has judged them all.  Without
    it the error overtook the records in flight: 3,010 lines judged with one worker, 2,560 with two."""

    def __init__(self) -> None:
        self.error: InputError | None = None

    def guard(self, records: Iterator[T]) -> Iterator[T]:
        try:
            yield from records
        except InputError as exc:
            self.error = exc

    def check(self) -> None:
        """Raise the InputError that ended the records, if one did."""
        if self.error is not None:
            raise self.error


def html_files(directory: Path) -> list[Path]:
    """The saved pages below ``directory``, in sorted order."""
    return sorted(p for p in directory.rglob("*") if p.suffix.lower() in HTML_SUFFIXES and p.is_file())


def read_page(directory: Path, file: Path) -> Record:
    """A saved page as a record: its path below ``directory`` as id (and ``path``), its ``<title>``,
    the bytes decoded as a browser would (GBK and Big5 too).  Raises BadRecordError if unreadable."""
    rel = file.relative_to(directory).as_posix()
    try:
        page = decode_html(file.read_bytes())
    except OSError as exc:
        raise BadRecordError(str(file), 0, f"unreadable ({exc.strerror})") from None
    data: dict[str, Any] = {"id": rel, "path": rel}
    title = _TITLE.search(page)
    if title:
        import html  # here: its entity table is ~1.5 ms of a start-up that reads no page (issue 40)

        data["title"] = html.unescape(title.group(1)).strip()
    return Record(str(file), 0, rel, None, page, data)


def read_pages(directory: Path, *, strict: bool = False, errors: list[BadRecordError] | None = None) -> Iterator[Record]:
    """Every saved page below ``directory`` (:func:`html_files`); unreadable ones as bad lines are."""
    for file in html_files(directory):
        try:
            yield read_page(directory, file)
        except BadRecordError as exc:
            skip(exc, strict, errors)


def skip(exc: BadRecordError, strict: bool, errors: list[BadRecordError] | None) -> None:
    """A bad record: raised again if ``strict``, else logged and kept in ``errors``; the run goes on."""
    if strict:
        raise exc
    logger.warning("skipped %s", exc)
    if errors is not None:
        errors.append(exc)


def open_input(path: str | Path) -> IO[str]:
    """``-`` is standard input; ``*.gz`` is gunzipped.  UTF-8 with or without BOM; undecodable bytes
    become U+FFFD rather than ending the run (such a line then fails as JSON, with its number)."""
    if str(path) == STDIN:
        return io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8-sig", errors="replace")
    if str(path).endswith(".gz"):
        import gzip  # here: only a .gz input needs it

        return gzip.open(path, "rt", encoding="utf-8-sig", errors="replace")
    return open(path, encoding="utf-8-sig", errors="replace")


def input_name(path: str | Path) -> str:
    """How an input is named in messages and checkpoints."""
    return "<stdin>" if str(path) == STDIN else str(path)
