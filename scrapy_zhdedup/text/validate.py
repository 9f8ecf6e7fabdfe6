"""What a document must be to be judged, checked once at every entry (JSONL, Scrapy items, an index).

Ids are kept NUL-separated by the embedded store, and every id and text is written as UTF-8
somewhere (store log, Elasticsearch, output lines): a NUL in an id, or a lone surrogate anywhere
(valid JSON, ``"\\ud800"``, but not Unicode text), would fail later, in the middle of a write.
Refused here, such a document is one bad record with a reason, and nothing has changed yet.
"""

from __future__ import annotations

from typing import Any

from ..errors import InvalidDocumentError


def check_id(value: Any) -> str:
    """The document id as text: a non-empty string or a number that any store can keep.

    Raises :class:`InvalidDocumentError` saying why not (object, list, boolean, empty, a NUL, a lone
    surrogate)."""
    if value is None or isinstance(value, (dict, list, bool)) or str(value) == "":
        raise InvalidDocumentError('no usable "id" (string or number)')
    doc_id = str(value)
    if "\x00" in doc_id:
        raise InvalidDocumentError("the id contains a NUL character")
    check_unicode("the id", doc_id)
    return doc_id


def check_unicode(what: str, value: str) -> None:
    """Raise :class:`InvalidDocumentError` if ``value`` cannot be written as UTF-8."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidDocumentError(
            f"{what} contains a lone surrogate ({value[exc.start]!r} at character {exc.start})") from None
