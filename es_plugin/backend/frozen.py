"""Searches of the documents' index that leave it search-idle: through a point in time.

The index has no refresh interval of its own (template.py): a shard nobody searches is not refreshed,
and the writers read it by realtime ``GET`` only.  One plain search makes the shard search-active for
``index.search.idle.after`` (30 s), and while it is active Elasticsearch refreshes it every second:
``es ingest``'s search for the ids it already stored (once a bulk) kept it active the whole run, and
its refreshes (small segments, then merging them) were a third of the node's CPU per ingested document.
A search through a point in time reads the view opened once and refreshes nothing.

Opening one makes the shard search-active too, once (as the backend's count of the documents at start
does): for a run of more than 30 s, the refreshes stop after its first 30 s.

A server without points in time (the OSS builds of Elasticsearch 7.x) is searched plainly, as before.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from elastic_transport import TransportError
from elasticsearch import ApiError, NotFoundError

from ..flavour import server_of
from ..operations import Call, Steps
from .retry import RetryPolicy
from .stats import EsStats

KEEP_ALIVE = "10m"  # between two searches of one view: a bulk's worth of documents judged

Search = Callable[[dict[str, Any]], Steps]  # a search body -> Steps: the answer


def plain_search(index: str, policy: RetryPolicy, stats: EsStats) -> Search:
    """A search of what ``index`` holds now (a missing index answers nothing); it makes the index
    search-active: for one-off searches."""
    def search(body: dict[str, Any]) -> Steps:
        return (yield from policy.call(lambda c: c.search(index=index, ignore_unavailable=True, **body), stats))
    return search


@dataclass
class FrozenView:
    """``index`` as it was when :meth:`open` ran (reopened if it expired between two searches)."""

    index: str
    policy: RetryPolicy
    native: bool  # the server has points in time
    stats: EsStats
    pit: str | None = None

    def open(self) -> Steps:
        """Steps: the point in time; a missing index has none (searches of it answer nothing)."""
        if not self.native:
            return None
        try:
            response = yield from self.policy.call(
                lambda c: c.open_point_in_time(index=self.index, keep_alive=KEEP_ALIVE), self.stats)
        except NotFoundError:
            return None
        self.pit = response["id"]
        return None

    def search(self, body: dict[str, Any]) -> Steps:
        """Steps: the answer of a search (``body``: query, aggs, size) of the view."""
        if not self.native:
            return (yield from plain_search(self.index, self.policy, self.stats)(body))
        if self.pit is None:
            return {}
        try:
            response = yield from self.policy.call(_search(self.pit, body), self.stats)
        except NotFoundError:
            yield from self.open()  # expired: what is stored now holds what was then
            if self.pit is None:
                return {}
            response = yield from self.policy.call(_search(self.pit, body), self.stats)
        self.pit = response.get("pit_id", self.pit)
        return response

    def close(self) -> Steps:
        if self.pit is not None:
            pit, self.pit = self.pit, None
            with contextlib.suppress(ApiError, TransportError):  # it expires by itself
                yield lambda c: c.close_point_in_time(id=pit)
        return None


def _search(pit: str, body: dict[str, Any]) -> Call:
    return lambda c: c.search(pit={"id": pit, "keep_alive": KEEP_ALIVE}, **body)


def frozen_view(client: Any, index: str, policy: RetryPolicy, stats: EsStats | None = None) -> FrozenView:
    return FrozenView(index, policy, server_of(client).point_in_time, stats or EsStats())

