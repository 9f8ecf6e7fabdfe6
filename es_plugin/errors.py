"""Every error the Elasticsearch side raises on purpose.

Each is a :class:`~scrapy_zhdedup.errors.ZhDedupError`, so a command says it in one line and the
pipeline knows what to do with it, and each pickles with its data as those do.
"""

from __future__ import annotations

from typing import Any

from scrapy_zhdedup.errors import ConfigError, StoreFailedError, StoreUnavailableError, ZhDedupError


class EsUnavailableError(ZhDedupError):
    """Elasticsearch cannot be reached, or refuses us (authentication, TLS), or stayed down past the retries."""


class ClientMismatchError(ConfigError):
    """The client that speaks to the server at the URL is not installed (flavour.py): the message names the
    extra to install."""


class MissingPrivilegeError(ZhDedupError):
    """The user may not do what the command needs on this cluster or index (privileges.py)."""


class LookupFailedError(EsUnavailableError, StoreUnavailableError):
    """An item's lookups failed past the retries: it was written to the dead-letter file, not judged."""


class LookupItemError(ZhDedupError):
    """One lookup of an ``mget``/``_msearch`` failed while the request succeeded."""

    def __init__(self, error: Any, status: int | None = None) -> None:
        super().__init__(f"Elasticsearch lookup failed ({status or ''} {error})")
        self.status = status


class EsRequestError(ZhDedupError):
    """Elasticsearch answered a command's request with an error, or the request failed on the way."""


class EsIndexError(ZhDedupError):
    """The index is missing, or cannot be used: not created by scrapy-zhdedup, its ``zhdedup`` mapping
    conflicts, or a stored ``zhdedup`` object is damaged."""


class WritesRejectedError(ZhDedupError):
    """Elasticsearch rejected some of a command's updates or deletes for good (``dedup-index``, ``reconcile``)."""


class BulkInterruptedError(ZhDedupError):
    """A bulk request ended without an answer (cancelled, interrupted): its documents are dead-lettered."""


class DeadLetterError(StoreFailedError):
    """The dead-letter file cannot be written: documents would be lost, so the run must stop."""


class CheckpointError(ZhDedupError):
    """A checkpoint file cannot be used: unreadable, another run's, or its input changed since."""


class IngestStopped(ZhDedupError):
    """Elasticsearch stopped taking documents; the checkpoint stays before the first one not acknowledged."""


class ClosingError(ZhDedupError):
    """A request to Elasticsearch failed once this process had begun closing its client (Ctrl-C, the end of a
    crawl): cut by the closing, not the node's doing; it is not retried and opens no outage (outage.py)."""
