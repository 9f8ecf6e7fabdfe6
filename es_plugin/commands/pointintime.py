"""THE way to read a whole index: a point in time walked with ``search_after``.

Used by ``dedup-index`` (every document, resumable), ``reconcile`` (every fingerprint) and
``search --all`` (every group of a collapsed query).  A point in time keeps the pages from
shifting while the index is written to.  With ``reopen`` an expired point in time (a paused run)
is replaced by a new one and the walk goes on from the same sort values, which is only correct
for a sort that means the same in every point in time (``dedup-index``'s ``[_seq_no, _shard_doc]``).

What a server lacks is handled here, once for every caller (flavour.py tells what it has): OpenSearch
2.4+ has its own point in time, which the client seam names as Elasticsearch's; a server without any (the
OSS builds of Elasticsearch 7.x) is read through a scroll, the frozen view it has, with the same sort (a
walk resumed from ``after``, or whose scroll expired, reads the scroll from its start and leaves out the
hits up to ``after``); a collapsed query, which a scroll refuses, walks the live index with
``search_after``; where collapse refuses ``search_after`` too (Elasticsearch 7.x, OpenSearch), a walk of a
collapsed query is refused with one line.  Where ``_shard_doc`` is missing (Elasticsearch before 7.12,
OpenSearch, a scroll), ``_id`` breaks the ties instead (fielddata on ``_id``, which those servers still allow).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from elasticsearch import ApiError, Elasticsearch, NotFoundError

from ..errors import EsRequestError
from ..flavour import server_of

Hit = dict[str, Any]


def _sort_values(hit: Hit) -> list[Any]:
    return list(hit["sort"])


def _descending(order: Any) -> bool:
    """Whether one entry of a ``sort`` (``"field"``, ``{"field": "desc"}``, ``{"field": {"order": "desc"}}``) is
    descending."""
    if not isinstance(order, dict):
        return False
    how = next(iter(order.values()))
    return (how.get("order") if isinstance(how, dict) else how) == "desc"


def _beyond(values: list[Any], after: list[Any], descending: list[bool]) -> bool:
    """Whether a hit's sort ``values`` come after ``after`` in the sort (missing values, ``None``, last)."""
    for value, last, desc in zip(values, after, descending):
        if value == last:
            continue
        if value is None or last is None:
            return last is not None
        return bool(value < last) if desc else bool(value > last)
    return False


class PointInTime:
    def __init__(self, client: Elasticsearch, index: str, *, keep_alive: str = "5m", refresh: bool = False) -> None:
        """``refresh``: make the index's latest writes visible before each point in time is opened."""
        self.client, self.index, self.keep_alive, self.refresh = client, index, keep_alive, refresh
        self.pit: str | None = None
        self.scroll: str | None = None
        server = server_of(client)
        self.native, self.shard_doc, self.collapse_after = server.point_in_time, server.shard_doc, \
            server.collapse_search_after

    def _open(self) -> str:
        if self.refresh:
            self.client.indices.refresh(index=self.index)
        self.pit = self.client.open_point_in_time(index=self.index, keep_alive=self.keep_alive)["id"]
        return self.pit

    def pages(self, body: dict[str, Any], after: list[Any] | None = None, *, reopen: bool = False,
              after_of: Callable[[Hit], list[Any]] = _sort_values) -> Iterator[list[Hit]]:
        """Pages of hits for ``body`` (its ``sort`` and ``size`` included), from after ``after``.

        ``after_of`` turns a page's last hit into the next ``search_after`` (collapse, for one, accepts
        only the collapse field's value, not the tiebreaker the point in time appends).
        """
        if "collapse" in body and not self.collapse_after:
            raise EsRequestError(f"{server_of(self.client)} cannot page a collapsed search (collapse with "
                                 f"search_after, Elasticsearch 8+): page it with from/size instead (es search --page)")
        size = body.get("size", 10)
        reopened = False
        if not self.shard_doc:
            body = {**body, "sort": [{"_id": order["_shard_doc"]} if isinstance(order, dict) and "_shard_doc" in order
                                     else order for order in body.get("sort", [])]}
        if not self.native and "collapse" not in body:
            yield from self._scrolled(body, after, reopen)
            return
        if not self.native and self.refresh:
            self.client.indices.refresh(index=self.index)
        while True:
            if self.native:
                request, index = {**body, "pit": {"id": self.pit or self._open(), "keep_alive": self.keep_alive}}, None
            else:
                request, index = dict(body), self.index
            if after is not None:
                request["search_after"] = after
            try:
                response = self.client.search(index=index, body=request)
            except NotFoundError:
                if not reopen or reopened:
                    raise
                self._open()  # expired: the same order in a new point in time
                reopened = True
                continue
            reopened = False
            self.pit = response.get("pit_id", self.pit)
            hits = response["hits"]["hits"]
            if hits:
                yield hits
            if len(hits) < size:
                return
            after = after_of(hits[-1])

    def _scrolled(self, body: dict[str, Any], after: list[Any] | None, reopen: bool) -> Iterator[list[Hit]]:
        """Pages of a scroll over ``body``, from after ``after`` (see the module's docstring)."""
        body = {key: value for key, value in body.items() if key != "track_total_hits"}  # a scroll counts them
        descending = [_descending(order) for order in body.get("sort", [])]
        reopened = False
        while True:
            if self.refresh:
                self.client.indices.refresh(index=self.index)
            try:
                response = self.client.search(index=self.index, body=body, scroll=self.keep_alive)
                while hits := response["hits"]["hits"]:
                    self.scroll = response["_scroll_id"]
                    if after is not None:
                        hits = [hit for hit in hits if _beyond(hit["sort"], after, descending)]
                    if hits:
                        yield hits
                        after, reopened = list(hits[-1]["sort"]), False
                    response = self.client.scroll(scroll_id=self.scroll, scroll=self.keep_alive)
                return
            except NotFoundError:
                if not reopen or reopened:
                    raise
                reopened = True  # expired: the same sort in a new scroll, from after the last hit read

    def close(self) -> None:
        if self.scroll is not None:
            with contextlib.suppress(ApiError):
                self.client.clear_scroll(scroll_id=self.scroll)
            self.scroll = None
        if self.pit is not None:
            with contextlib.suppress(ApiError):  # already expired: nothing left to free
                self.client.close_point_in_time(id=self.pit)
            self.pit = None

    def __enter__(self) -> PointInTime:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
