"""Exceptions the engine raises, so callers can tell bad input from a broken store."""


class ZhDedupError(Exception):
    """Base class for every error scrapy-zhdedup raises on purpose."""


class InvalidDocumentError(ZhDedupError, ValueError):
    """A document that cannot be judged or stored as given (e.g. a NUL in its id)."""


class ConfigError(ZhDedupError, ValueError):
    """A setting or option has a value scrapy-zhdedup cannot use."""


class EmptyTextError(InvalidDocumentError):
    """The document has no text left to judge after cleaning (empty, markup only, no CJK or words)."""


class StoreError(ZhDedupError):
    """A persisted store file cannot be used: corrupt, truncated, foreign or from an incompatible version."""

    RESET_HINT = ("Move or delete this file to start with an empty store (everything it remembered will be "
                  "forgotten), or point ZHDEDUP_STORE_DIR / --store elsewhere.")

    def __init__(self, path: object, reason: str, hint: str = RESET_HINT) -> None:
        super().__init__(f"{path}: {reason}. {hint}")
        self.path = path
        self.reason = reason


class LayoutMismatchError(ZhDedupError):
    """Client band layout differs from the one an existing index was built with; lookups would miss silently."""


class StoreFailedError(ZhDedupError):
    """The store can take nothing more (a full disk under the embedded store, a dead-letter file that cannot
    be written): the crawl must stop."""


class StoreUnavailableError(ZhDedupError):
    """The store could not judge an item now (e.g. Elasticsearch down past the retries); the backend kept the
    item (its dead-letter file) to be judged later, so the pipeline drops it instead of failing the crawl."""
