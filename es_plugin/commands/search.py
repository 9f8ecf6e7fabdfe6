"""Search with near-duplicates folded: one hit per ``zhdedup.cluster``, plus how many it stands for.

How the folding is done, and why:

* ``collapse`` on ``zhdedup.cluster`` (a keyword with doc values) keeps the best hit of each
  cluster.  The number of documents each hit stands for comes from an ``inner_hits`` block on the
  collapse: Elasticsearch expands every returned group with one extra search (the original query
  plus a term filter on that cluster), all sent as one multi-search.  With ``size: 0`` it returns
  only ``hits.total``, the exact number of the cluster's documents that match the query; with
  ``size: n`` the best ``n`` of them as well.  The cost grows with the page size, not with the
  result set, and the count is exact (a ``terms`` aggregation would need a second pass of the query
  over every match; a ``cardinality`` is approximate and cannot be per hit).
* The number of groups for the whole query is a ``cardinality`` aggregation on the cluster field,
  with the maximum ``precision_threshold`` (40000): exact in practice below that many clusters,
  HyperLogLog-approximate (within a few percent) above it.

Paging, and its limits (checked against Elasticsearch 9.2):

* Relevance pages use ``from``/``size`` on the collapsed groups, sorted by ``_score`` then by the
  cluster id.  The cluster id is unique per group, so the order is total: on an index that does not
  change between requests no group is repeated or lost across pages.  ``from + size`` must stay
  within ``index.max_result_window`` (10000 groups by default), and ``inner_hits`` within
  ``index.max_inner_result_window`` (100).
* ``search_after`` with ``collapse`` is refused unless the sort is the collapse field alone, so there
  is no deep paging in relevance order.  :func:`iter_folded` walks *every* group of a query (no
  window limit) in cluster-id order instead: point in time + ``search_after`` on the cluster field.
* Documents without ``zhdedup.cluster`` (not deduplicated yet) are collapsed into a single group by
  Elasticsearch; run ``zhdedup es dedup-index`` on such an index first.

Which document leads a group: ``collapse`` keeps the best-scoring one, often a repost (a site that
repeats the keywords in its header).  A second inner-hits block, ``original``, asks each group for
its matching document with the status ``unique`` (sorted on ``zhdedup.status``, oldest first): the
cluster's original when it matches the query, whatever ``inner_hits`` asks for.  It costs one more
small search per group on the page, run by the node in the same request.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from elasticsearch import ApiError, Elasticsearch

from scrapy_zhdedup.errors import ConfigError, ZhDedupError
from scrapy_zhdedup.esurl import node_urls
from scrapy_zhdedup.explain import decided

from ..errors import EsIndexError, EsRequestError
from ..index.chinese import DEFAULT_SEARCH, SearchText
from ..index.document import CLUSTER, FIELD, SEEN_AT, SHOWN, STATUS, VERDICT, Stored, item_fields
from .pointintime import PointInTime

FOLDED = "folded"  # name of the inner_hits block
ORIGINAL = "original"  # the inner_hits block that finds the group's original
MAX_PRECISION = 40_000  # the largest precision_threshold Elasticsearch accepts


def default_fields(search: SearchText = DEFAULT_SEARCH) -> tuple[str, str]:
    """What a query searches and shows unless told otherwise: the title and the text field."""
    return ("title", search.text_field)


def query_clause(query: str | Mapping[str, Any], fields: Sequence[str], search: SearchText = DEFAULT_SEARCH) -> dict[str, Any]:
    """A query string becomes "all its words in one of ``fields``", phrases ranked first.

    The words are jieba's (the query segmented like the stored text, see chinese.py) or the cluster's
    analyzer's; requiring all of them, not any, keeps results on topic.  A dict is used as the
    query clause itself (or its ``query`` key, for a whole body), unchanged.
    """
    if isinstance(query, Mapping):
        return dict(query["query"]) if "query" in query else dict(query)
    words = search.query_text(query)
    if not words:
        raise ConfigError(f"no words to search for in {query!r}")
    searched = search.searched(fields)
    return {"bool": {
        "must": [{"multi_match": {"query": words, "fields": searched, "operator": "and"}}],
        "should": [{"multi_match": {"query": words, "fields": searched, "type": "phrase", "boost": 2}}],
    }}


def folded_query_body(query: str | Mapping[str, Any], *, page: int = 1, size: int = 10, inner_hits: int = 0,
                      fields: Sequence[str] | None = None, search: SearchText = DEFAULT_SEARCH) -> dict[str, Any]:
    """The search body (usable as is in Kibana Dev Tools) for one page of folded results; ``fields``
    default to the title and the text field (:func:`default_fields`)."""
    if page < 1 or size < 1:
        raise ConfigError("page and size must be at least 1")
    if inner_hits < 0:
        raise ConfigError("inner_hits must be >= 0")
    fields = default_fields(search) if fields is None else fields
    source = [*fields, *SHOWN]
    return {
        "query": query_clause(query, fields, search),
        "collapse": {
            "field": CLUSTER,
            "inner_hits": [
                # +1: the group's top hit is among its inner hits and is left out of the duplicates
                {"name": FOLDED, "size": inner_hits + 1 if inner_hits else 0, "_source": source if inner_hits else False},
                # "unique" sorts after "near" and "exact": the original, if it matches, else a repeat
                {"name": ORIGINAL, "size": 1, "_source": source,
                 "sort": [{STATUS: {"order": "desc", "unmapped_type": "keyword"}},
                          {SEEN_AT: {"order": "asc", "unmapped_type": "date"}}]},
            ],
        },
        "sort": ["_score", {CLUSTER: "asc"}],
        "from": (page - 1) * size,
        "size": size,
        "_source": source,
        "track_total_hits": True,
        "aggs": {"groups": {"cardinality": {"field": CLUSTER, "precision_threshold": MAX_PRECISION}}},
    }


def folded_search(client: Elasticsearch, index: str, query: str | Mapping[str, Any], *, page: int = 1,
                  size: int = 10, inner_hits: int = 0, fields: Sequence[str] | None = None,
                  search: SearchText = DEFAULT_SEARCH) -> dict[str, Any]:
    """One page of results, one hit per duplicate cluster.

    Returns ``total_hits`` (matching documents before folding), ``total_groups`` (after folding),
    ``pages``, and ``hits``: per group its best document, ``folded`` (how many other documents of
    the cluster match the query and were folded under it) and up to ``inner_hits`` of those.
    """
    body = folded_query_body(query, page=page, size=size, inner_hits=inner_hits, fields=fields, search=search)
    try:
        resp = client.search(index=index, body=body)
    except ApiError as exc:
        raise _search_error(exc, index) from exc
    groups = resp["aggregations"]["groups"]["value"]
    return {
        "index": index,
        "page": page,
        "size": size,
        "total_hits": resp["hits"]["total"]["value"],
        "total_groups": groups,
        "groups_exact": groups < MAX_PRECISION,
        "pages": -(-groups // size),
        "took_ms": resp["took"],
        "hits": [_group(hit, inner_hits) for hit in resp["hits"]["hits"]],
    }


def iter_folded(client: Elasticsearch, index: str, query: str | Mapping[str, Any], *, batch: int = 500,
                fields: Sequence[str] | None = None, search: SearchText = DEFAULT_SEARCH,
                keep_alive: str = "2m") -> Iterator[dict[str, Any]]:
    """Every group of a query once, in cluster-id order, without the result-window limit.

    Collapse allows ``search_after`` only when sorting on the collapse field alone; the point in
    time keeps the groups from shifting between batches while the index is written to.
    """
    body = folded_query_body(query, size=batch, fields=fields, search=search)
    del body["from"], body["aggs"]
    body["sort"] = [{CLUSTER: "asc"}]
    body["track_total_hits"] = False
    try:
        with PointInTime(client, index, keep_alive=keep_alive) as reader:
            # the point in time appends a _shard_doc tiebreaker to the sort values; collapse refuses it
            # back, and the cluster id alone is unique per group anyway
            for hits in reader.pages(body, after_of=lambda hit: hit["sort"][:1]):
                for hit in hits:
                    yield _group(hit, 0)
    except ApiError as exc:
        raise _search_error(exc, index) from exc


def _group(hit: dict[str, Any], inner_hits: int) -> dict[str, Any]:
    """The group's best hit with the others under it; the cluster's original leads when it matches the
    query (the ``original`` block finds it whatever ``inner_hits`` is), so a repost is never shown above
    the text it repeats.  The group keeps the score of its best hit, by which it was ranked."""
    blocks = hit.get("inner_hits", {})
    inner = blocks.get(FOLDED, {}).get("hits", {"total": {"value": 1}, "hits": []})
    found = [_doc(h) for h in blocks.get(ORIGINAL, {}).get("hits", {}).get("hits", [])]
    top = _doc(hit)
    members = [top, *(_doc(h) for h in inner["hits"] if h["_id"] != hit["_id"])]
    lead = next((d for d in [*members, *found] if d["status"] == "unique" and d["doc_id"] == d["cluster"]), top)
    duplicates = [d for d in members if d["id"] != lead["id"]]
    return {**lead, "score": top["score"], "folded": max(0, inner["total"]["value"] - 1),
            "duplicates": duplicates[:inner_hits]}


def _doc(hit: dict[str, Any]) -> dict[str, Any]:
    source = hit.get("_source") or {}
    stored = Stored.from_source(source) if source.get(FIELD) else None  # none: not deduplicated yet
    return {"id": hit["_id"], **{name: getattr(stored, name, None) for name in VERDICT}, "score": hit.get("_score"),
            "source": item_fields(source)}


def _search_error(exc: ApiError, index: str) -> ZhDedupError:
    reason = _root_reason(exc)
    if "Result window is too large" in reason:
        return ConfigError(f"{index}: page out of range ({reason}); use iter_folded / --all to walk every group")
    if exc.status_code == 404:
        return EsIndexError(f"{index}: no such index")
    return EsRequestError(f"{index}: search failed ({exc.status_code}): {reason}")


def _root_reason(exc: ApiError) -> str:
    body = exc.body if isinstance(exc.body, dict) else {}
    error = body.get("error", {})
    if isinstance(error, dict):
        causes = error.get("root_cause") or [error]
        return str(causes[0].get("reason", error))
    return str(error or exc)


# --- as the command prints it ------------------------------------------------------------------------


def curl_command(url: str, index: str, body: dict[str, Any]) -> str:
    """The search as a shell command to paste, sent to the first node of ``url`` (credentials left out);
    the body goes through a quoted here-document, so no character of the query needs escaping."""
    first = node_urls(url)[0].url
    return (f"curl -sS -H 'Content-Type: application/json' '{first.rstrip('/')}/{index}/_search?pretty' -d @- <<'JSON'\n"
            f"{_readable_json(body)}\nJSON")


def _readable_json(value: Any, depth: int = 0, open_levels: int = 3) -> str:
    """JSON with objects opened up to ``open_levels`` deep and anything deeper on one line: short enough
    for a README, structured enough to read."""
    pad = "  " * (depth + 1)
    if isinstance(value, list) and depth < open_levels and value and all(isinstance(v, dict) for v in value):
        items = ",\n".join(pad + _readable_json(v, depth + 1, open_levels + 1) for v in value)
        return f"[\n{items}\n{'  ' * depth}]"
    if not isinstance(value, dict) or depth >= open_levels or not value:
        return json.dumps(value, ensure_ascii=False)
    items = ",\n".join(f"{pad}{json.dumps(k, ensure_ascii=False)}: {_readable_json(v, depth + 1, open_levels)}"
                       for k, v in value.items())
    return f"{{\n{items}\n{'  ' * depth}}}"


def page_lines(result: dict[str, Any], fields: Sequence[str]) -> list[str]:
    """A page of :func:`folded_search` as ``zhdedup es search`` prints it: how many, then each group's
    leading hit (a snippet of its text, its id, how many it folds) and the repeats shown under it."""
    lines = [_page_line(result)]
    for rank, hit in enumerate(result["hits"], start=(result["page"] - 1) * result["size"] + 1):
        folded = hit["folded"]
        lines.append(f"{rank:3d}. {_snippet(hit, fields)}  [{_name(hit)}]"
                     + (f"  +{_plural(folded, 'repeat')} folded" if folded else ""))
        lines += [f"       ~ {_name(dup)} ({_how(dup)})" for dup in hit["duplicates"]]
    return lines


def _page_line(result: dict[str, Any]) -> str:
    if not result["total_hits"]:
        return "no matches"
    groups = _plural(result["total_groups"], "group") + ("" if result["groups_exact"] else " (approx.)")
    return f"{_plural(result['total_hits'], 'document')} in {groups}; page {result['page']} of {result['pages']}"


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _name(doc: dict[str, Any]) -> str:
    return str(doc["doc_id"] or doc["id"])


def _how(doc: dict[str, Any]) -> str:
    if doc["status"] == "unique":
        return "original"
    if doc["status"] == "exact":
        return "exact repeat"
    if doc["status"] == "near":
        return f"near repeat, {decided(doc.get('reason'), doc.get('similarity'), doc.get('contained'))}"
    return "not judged yet"


def _snippet(hit: dict[str, Any], fields: Sequence[str], width: int = 60) -> str:
    for name in fields:
        value = hit["source"].get(name)
        if isinstance(value, str) and value.strip():
            flat = " ".join(value.split())
            return flat if len(flat) <= width else flat[: width - 1] + "…"
    return "(no text)"
