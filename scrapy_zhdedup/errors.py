"""Every error scrapy-zhdedup raises on purpose, so callers can tell bad input from a broken store.

Each one pickles whole, with its data: worker processes send an item's error back in its place.
"""

from __future__ import annotations

from typing import Any


class ZhDedupError(Exception):
    """Base class for every error scrapy-zhdedup raises on purpose; never raised itself, each raise
    says what went wrong with a subclass."""

    def __reduce__(self) -> tuple[Any, ...]:
        """Rebuilt from its message and attributes, not by calling ``__init__`` again (whose arguments
        differ per class), so every subclass pickles as it is."""
        return _rebuilt, (type(self), self.args, self.__dict__)


def _rebuilt(cls: type[ZhDedupError], args: tuple[Any, ...], state: dict[str, Any]) -> ZhDedupError:
    error = cls.__new__(cls, *args)
    error.args = args
    error.__dict__.update(state)
    return error


class ConfigError(ZhDedupError, ValueError):
    """A setting, an option or the installation has something scrapy-zhdedup cannot work with (a value out
    of range, a missing extra)."""


class InvalidDocumentError(ZhDedupError, ValueError):
    """A document that cannot be judged or stored as given (e.g. a NUL in its id)."""

    skipped_as = "invalid"


class EmptyTextError(InvalidDocumentError):
    """The document has no text left to judge after cleaning (empty, markup only, no CJK or words)."""

    skipped_as = "empty_text"  # the reason a crawl counts it under (zhdedup/skipped/...)


class JunkError(EmptyTextError):
    """The document is none: binary data served as a page, a page that is only its site's furniture
    (text/junk.py).  Skipped like an empty page, under its own reason."""

    skipped_as = "junk"


class InputError(ZhDedupError):
    """An input the command cannot use (missing, not what it reads) or cannot read on (a truncated
    ``.gz``, a read error): the command stops."""

    @classmethod
    def unreadable(cls, path: str, line: int, exc: BaseException) -> InputError:
        reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        damaged = " (a truncated or damaged .gz file?)" if path.endswith(".gz") else ""
        return cls(f"{path}: cannot read past line {line}: {reason}{damaged}")


class BadRecordError(ZhDedupError, ValueError):
    """One line of an input (or one saved page: line 0) that is not a usable record; it is reported and
    skipped (or stops a strict run)."""

    def __init__(self, path: str, line: int, reason: str) -> None:
        super().__init__(f"{path}:{line}: {reason}" if line else f"{path}: {reason}")
        self.path, self.line, self.reason = path, line, reason

    @classmethod
    def unjudged(cls, path: str, line: int, exc: Exception) -> BadRecordError:
        """A record read well whose document could not be judged (``scan`` and ``es ingest`` say it alike)."""
        what = ("not a document" if isinstance(exc, JunkError) else "no text to judge" if isinstance(exc, EmptyTextError)
                else "cannot be judged")
        return cls(path, line, f"{what} ({exc})")


class Interrupted(KeyboardInterrupt):
    """Ctrl-C, with what the command had done and how to go on: ``zhdedup`` prints it and exits 130."""

    @classmethod
    def after(cls, documents: int, resumable: bool) -> Interrupted:
        then = ("rerun the same command to resume" if resumable else
                "nothing is kept without --store: rerun the same command to start again")
        return cls(f"interrupted after {documents} documents; {then}")


class OutputError(ZhDedupError):
    """An output that cannot be written: its directory is missing, it is one of the inputs, the disk is full."""


class StoreError(ZhDedupError):
    """A persisted store file cannot be used: corrupt, truncated, foreign or from an incompatible version."""

    RESET_HINT = ("Move or delete this file to start with an empty store (everything it remembered will be "
                  "forgotten), or point ZHDEDUP_STORE_DIR / --store elsewhere.")

    def __init__(self, path: object, reason: str, hint: str = RESET_HINT) -> None:
        super().__init__(f"{path}: {reason}. {hint}")
        self.path = path
        self.reason = reason


class StoreLockedError(StoreError):
    """Another writer (this process or another) holds the store directory."""

    def __init__(self, directory: object, holder: str) -> None:
        super().__init__(directory, f"the store is in use by another writer (pid {holder})",
                         hint="Wait for that run to finish, or point ZHDEDUP_STORE_DIR / --store elsewhere.")
        self.holder = holder


class LayoutMismatchError(ZhDedupError):
    """Client band layout differs from the one an existing index was built with; lookups would miss silently."""


class StoreFailedError(ZhDedupError):
    """The store can take nothing more (a full disk under the embedded store, a dead-letter file that cannot
    be written): the crawl must stop."""


class StoreUnavailableError(ZhDedupError):
    """The store could not judge an item now (e.g. Elasticsearch down past the retries); the backend kept the
    item (its dead-letter file) to be judged later, so the pipeline drops it instead of failing the crawl."""
