"""The index template that gives an index its ``zhdedup`` fields, and the checks that an index fits a client.

The band layout decides which keyword fields hold the band keys.  A client with another layout would
query fields that hold other keys and silently find nothing, so the layout is stored in the mapping's
``_meta.zhdedup`` and every client compares it with its own before the first lookup.  The same holds
for the fingerprint settings (features, shingle size, t2s, extractor, passage size ...): hashes,
fingerprints and passage keys computed under other settings never match the stored ones, so they are
recorded too (``fingerprint``, the list in scrapy_zhdedup/fingerprint_settings.py, as the embedded store's) and a
client with other settings is refused, naming each difference.
An index from before they were recorded has none and is not checked.

Each operation is written once, as :data:`~es_plugin.operations.Steps`, and run by the sync or the async
driver, so the ``es`` CLI (sync client) and the backend (async client) share every check.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

from elasticsearch import AsyncElasticsearch, BadRequestError, Elasticsearch, NotFoundError

from scrapy_zhdedup import __version__
from scrapy_zhdedup.errors import ConfigError, LayoutMismatchError, ZhDedupError
from scrapy_zhdedup.index.bands import BandLayout

from ..errors import EsIndexError
from ..operations import Steps, adrive, drive
from .chinese import DEFAULT_SEARCH, SearchText
from .document import CLUSTER, FIELD, STATUS, dedup_properties

Fill = Callable[[str], Steps]  # fills a registry from its index's originals (backend/registry.py's fill)

TEMPLATE_VERSION = 5  # 5: the key registry, refresh on search; 4: directed verdicts (contained, reason); 3: MinHash
# sketch and its keys; 2: Chinese search
REGISTRY_VERSION = 1
PRIORITY = 500  # above the usual catch-all templates, so ours is the one applied to the index


def template_name(index: str) -> str:
    return f"zhdedup-{index}"


def _meta(layout: BandLayout, fingerprint: dict[str, Any] | None) -> dict[str, Any]:
    meta: dict[str, Any] = {"template_version": TEMPLATE_VERSION, "layout": layout.to_dict(),
                            "package_version": __version__}
    if fingerprint is not None:
        meta["fingerprint"] = fingerprint
    return {"zhdedup": meta}


def _body_digest(body: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def template_body(index: str, layout: BandLayout, user_properties: dict[str, Any] | None = None, *,
                  shards: int = 1, search: SearchText = DEFAULT_SEARCH,
                  fingerprint: dict[str, Any] | None = None) -> dict[str, Any]:
    """``PUT _index_template`` body for exactly ``index`` (the pattern is the name, no wildcard).

    ``user_properties`` map the item's own fields, over ``search``'s mapping of the text, title and
    ids.  One shard by default, since every lookup searches all shards of the index; replicas
    ``0-1``, so a single node is green and a cluster keeps a copy.  The refresh interval is left to
    Elasticsearch: lookups are realtime ``GET``s, which need no refresh, and a shard nobody searches is
    not refreshed at all (``index.search.idle.after``) until a search asks, which waits for it; a
    periodic refresh forced on cost ~40 % of the node's CPU in ``es ingest``.
    The template's ``_meta`` carries a digest of the body
    so :func:`install` can tell an unchanged template without comparing ES's normalised echo of it.
    """
    if FIELD in (user_properties or {}):
        raise ConfigError("user mapping may not define 'zhdedup': scrapy-zhdedup owns that field")
    body: dict[str, Any] = {
        "index_patterns": [index],
        "priority": PRIORITY,
        "version": TEMPLATE_VERSION,
        "_meta": _meta(layout, fingerprint),
        "template": {
            "settings": {"index": {"number_of_shards": shards, "auto_expand_replicas": "0-1"}},
            "mappings": {"_meta": _meta(layout, fingerprint),
                         "properties": {**search.properties(), **(user_properties or {}),
                                        **dedup_properties(layout)}},
        },
    }
    body["_meta"]["zhdedup"]["body_sha256"] = _body_digest(body)
    return body


# --- checks on an existing index ---------------------------------------------------------------------


def _describe(layout: BandLayout) -> str:
    return f"threshold (k) {layout.k}, bands (blocks) {layout.blocks}"


def check_mappings(index: str, mappings: dict[str, Any], layout: BandLayout,
                   fingerprint: dict[str, Any] | None = None) -> None:
    """Raise unless every concrete index in a ``GET _mapping`` answer fits ``layout`` (and ``fingerprint``)."""
    for concrete, entry in sorted(mappings.items()):
        mapping = entry.get("mappings", {})
        field = mapping.get("properties", {}).get(FIELD)
        if field is not None and ("properties" not in field or field.get("type", "object") != "object"):
            raise EsIndexError(
                f"index {concrete!r}: field 'zhdedup' is mapped as {field.get('type', 'a non-object')!r}, which "
                f"conflicts with the object scrapy-zhdedup stores there. Use another index (ZHDEDUP_ES_INDEX / "
                f"--index), or delete this one and let scrapy-zhdedup create it."
            )
        meta = mapping.get("_meta", {}).get("zhdedup")
        if meta is None:
            raise EsIndexError(
                f"index {concrete!r} exists but was not created from the scrapy-zhdedup template (its mapping "
                f"has no _meta.zhdedup: made by hand, or another template with a higher priority matched). "
                f"Use another index name (ZHDEDUP_ES_INDEX / --index), or delete it and run `zhdedup es install`."
            )
        version = meta.get("template_version")
        if not isinstance(version, int) or version > TEMPLATE_VERSION:
            raise EsIndexError(
                f"index {concrete!r} uses template version {version!r}, which this scrapy-zhdedup "
                f"({__version__}, template {TEMPLATE_VERSION}) does not know: upgrade scrapy-zhdedup"
            )
        try:
            theirs = BandLayout.from_dict(meta["layout"])
        except (KeyError, TypeError, ValueError) as exc:
            raise EsIndexError(f"index {concrete!r}: unreadable band layout in _meta.zhdedup ({exc})") from exc
        if theirs != layout:
            raise LayoutMismatchError(
                f"index {concrete!r} was built with band layout {_describe(theirs)}, but this client uses "
                f"{_describe(layout)}; its lookups would silently miss. Set ZHDEDUP_THRESHOLD={theirs.k} and "
                f"ZHDEDUP_BANDS={theirs.blocks} (--threshold/--bands) to use this index, or point "
                f"ZHDEDUP_ES_INDEX (--index) at a new index for the new layout."
            )
        recorded = meta.get("fingerprint")
        if fingerprint is not None and isinstance(recorded, dict):
            differing = [f"{name}: index {recorded.get(name)!r}, this client {value!r}"
                         for name, value in fingerprint.items() if recorded.get(name) != value]
            if differing:
                remedy = ("Ingest again into a new index (ZHDEDUP_ES_INDEX / --index): its sketches were made by "
                          "another version of scrapy-zhdedup." if recorded.get("sketch") != fingerprint.get("sketch")
                          else "Use the index's settings (ZHDEDUP_<NAME> / --<name>), or point ZHDEDUP_ES_INDEX "
                               "(--index) at a new index for the new settings.")
                raise LayoutMismatchError(
                    f"index {concrete!r} was built with other fingerprint settings ({'; '.join(differing)}); its "
                    f"documents would silently stop matching. {remedy}")
        actual = field["properties"] if field else {}
        expected = dedup_properties(layout)[FIELD]["properties"]
        wrong = [f"zhdedup.{name} is {actual.get(name, {}).get('type', 'missing')} (needs {spec['type']})"
                 for name, spec in expected.items() if actual.get(name, {}).get("type") != spec["type"]
                 and not (name == "words" and name not in actual)]  # template 1 had none: `es install` adds it
        if wrong:
            raise EsIndexError(
                f"index {concrete!r}: mapping conflict on the zhdedup fields: {'; '.join(wrong)}. "
                f"Delete the index or use another one, and let scrapy-zhdedup create it from its template."
            )


def _get_mappings(index: str) -> Steps:
    """Steps: the index's mappings by concrete index, or None when it does not exist."""
    try:
        response = yield lambda c: c.indices.get_mapping(index=index)
    except NotFoundError:
        return None
    return dict(response.body)


def _get_template(name: str) -> Steps:
    try:
        response = yield lambda c: c.indices.get_index_template(name=name)
    except NotFoundError:
        return None
    found = response.body.get("index_templates", [])
    return found[0]["index_template"] if found else None


def _ensure_layout(index: str, layout: BandLayout, fingerprint: dict[str, Any] | None = None) -> Steps:
    mappings = yield from _get_mappings(index)
    if mappings is None:
        raise EsIndexError(f"index {index!r} does not exist: create it with `zhdedup es install` "
                           f"(the Scrapy backend creates it on start)")
    check_mappings(index, mappings, layout, fingerprint)
    return None


def _read_meta(index: str) -> Steps:
    mappings = yield from _get_mappings(index)
    for entry in (mappings or {}).values():
        meta = entry.get("mappings", {}).get("_meta", {}).get("zhdedup")
        if meta is not None:
            return dict(meta)
    return None


def registry_name(index: str) -> str:
    """The key registry beside ``index`` (backend/registry.py)."""
    return f"{index}-keys"


def _registry_meta(filled: bool) -> dict[str, Any]:
    return {"zhdedup": {"registry_version": REGISTRY_VERSION, "filled": filled}}


def _registry(index: str) -> Steps:
    """Steps: the registry's ``_meta.zhdedup``, or None when it does not exist."""
    mappings = yield from _get_mappings(registry_name(index))
    if mappings is None:
        return None
    entry: dict[str, Any] = next(iter(mappings.values()), {})
    return entry.get("mappings", {}).get("_meta", {}).get("zhdedup", {})


def _create_registry(index: str, shards: int, filled: bool) -> Steps:
    """Steps: the key registry, unless it exists: one small document per key (``_source`` only, nothing
    indexed), read and written by ``_id`` only, so it is never refreshed on a timer."""
    try:
        yield lambda c: c.indices.create(index=registry_name(index), settings={"index": {
            "number_of_shards": shards, "auto_expand_replicas": "0-1", "refresh_interval": "-1"}},
            mappings={"dynamic": False, "_meta": _registry_meta(filled)})
    except BadRequestError as exc:
        if exc.error != "resource_already_exists_exception":  # another writer may create it first
            raise
    return None


def _check_registry(index: str) -> Steps:
    meta = yield from _registry(index)
    if meta is None or not meta.get("filled"):
        raise EsIndexError(
            f"index {index!r} has no complete key registry {registry_name(index)!r} (made before template 5, or "
            f"its filling was interrupted): run `zhdedup es install --index {index}` to build it (resumable)")
    return None


def _upgrade(index: str, shards: int, fill: Fill | None) -> Steps:
    """Steps: an index of an older template given what this one has: the registry, filled from the
    index's originals (resumably: filling again adds only what is missing), and refresh on search."""
    meta = yield from _registry(index)
    if meta is not None and meta.get("filled"):
        return False
    if fill is None:
        yield from _check_registry(index)
    assert fill is not None
    yield from _create_registry(index, shards, filled=False)
    yield lambda c: c.indices.put_settings(index=index, settings={"index": {"refresh_interval": None}})
    yield from fill(index)
    yield lambda c: c.indices.put_mapping(index=registry_name(index), meta=_registry_meta(True))
    return True


def _claimed(index: str, fill: Fill) -> Steps:
    yield from _create_registry(index, 1, filled=False)
    yield from fill(index)
    yield lambda c: c.indices.put_mapping(index=registry_name(index), meta=_registry_meta(True))
    return None


def claim_originals(client: Elasticsearch, index: str, fill: Fill) -> None:
    """The index's originals' keys claimed in its registry, made if missing (``dedup-index``, which judges
    an index's documents in memory and writes their verdicts in place)."""
    drive(client, _claimed(index, fill))


def _user_properties(template: dict[str, Any]) -> dict[str, Any]:
    props = template.get("template", {}).get("mappings", {}).get("properties", {})
    return {name: spec for name, spec in props.items() if name != FIELD}


def _install(index: str, layout: BandLayout, user_properties: dict[str, Any] | None, shards: int,
             search: SearchText, replace: bool, fingerprint: dict[str, Any] | None, fill: Fill | None) -> Steps:
    name = template_name(index)
    mappings = yield from _get_mappings(index)
    upgraded = False
    if mappings is not None:
        check_mappings(index, mappings, layout, fingerprint)  # before the template is touched
        if not replace:  # the template only makes new indices: a writer of one that exists needs no access to it
            yield from _check_registry(index)
            return {"index": index, "template": name, "template_action": "kept", "index_action": "exists",
                    "template_version": TEMPLATE_VERSION, "layout": layout.to_dict()}
        upgraded = yield from _upgrade(index, shards, fill)
    current = yield from _get_template(name)
    if user_properties is None and current is not None:
        user_properties = _user_properties(current)  # re-installing must not drop the user's mapping
    body = template_body(index, layout, user_properties, shards=shards, search=search, fingerprint=fingerprint)
    if current is None:
        template_action = "created"
    elif current.get("_meta", {}).get("zhdedup", {}).get("body_sha256") == body["_meta"]["zhdedup"]["body_sha256"]:
        template_action = "unchanged"
    else:
        template_action = "updated" if replace else "kept"
    if template_action in ("created", "updated"):
        yield lambda c: c.indices.put_index_template(name=name, body=body)
    if mappings is None:
        yield from _create_registry(index, shards, filled=True)  # first: a writer that sees the index sees it
        try:
            yield lambda c: c.indices.create(index=index)
            index_action = "created"
        except BadRequestError as exc:
            if exc.error != "resource_already_exists_exception":  # another writer may create it first
                raise
            index_action = "exists"
        yield from _ensure_layout(index, layout, fingerprint)  # a template with a higher priority would have won
    elif template_action == "updated":
        mapping = body["template"]["mappings"]
        try:
            yield lambda c: c.indices.put_mapping(index=index, properties=mapping["properties"], meta=mapping["_meta"])
        except BadRequestError as exc:
            raise EsIndexError(f"index {index!r}: the new template's mapping cannot be applied to the existing "
                               f"index ({exc.message}): {exc.info}") from exc
        index_action = "mapping updated"
    else:
        index_action = "exists"
    if upgraded:
        index_action += ", key registry filled"
    return {"index": index, "template": name, "template_action": template_action, "index_action": index_action,
            "template_version": TEMPLATE_VERSION, "layout": layout.to_dict()}


def _status(index: str, layout: BandLayout | None) -> Steps:
    name = template_name(index)
    template = yield from _get_template(name)
    out: dict[str, Any] = {
        "index": index, "template": name,
        "template_version": template.get("version") if template else None,
        "package_template_version": TEMPLATE_VERSION, "package_version": __version__,
        "client_layout": layout.to_dict() if layout else None,
    }
    mappings = yield from _get_mappings(index)
    out["exists"] = mappings is not None
    if mappings is None:
        out.update(index_layout=None, docs=0, clusters=0, statuses={}, matches=False,
                   problem=f"index {index!r} does not exist")
        return out
    meta = next((e.get("mappings", {}).get("_meta", {}).get("zhdedup") for e in mappings.values()), None) or {}
    out["index_template_version"] = meta.get("template_version")
    out["index_layout"] = meta.get("layout")
    try:
        check_mappings(index, mappings, layout or BandLayout.from_dict(meta["layout"]))
        out["problem"] = None
    except (ZhDedupError, KeyError, TypeError, ValueError) as exc:
        out["problem"] = str(exc)
    # the index's own mapping is what lookups use; the template only shapes indices created later, and an
    # index prepared by `dedup-index` has none
    out["matches"] = out["problem"] is None
    count = yield lambda c: c.count(index=index)
    out["docs"] = count.body["count"]
    aggs = yield lambda c: c.search(index=index, size=0, aggs={
        "clusters": {"cardinality": {"field": CLUSTER}},
        "statuses": {"terms": {"field": STATUS}},
    })
    out["clusters"] = aggs.body["aggregations"]["clusters"]["value"]
    out["statuses"] = {b["key"]: b["doc_count"] for b in aggs.body["aggregations"]["statuses"]["buckets"]}
    return out


# --- drivers and the public functions -------------------------------------------------------------------


def install(client: Elasticsearch, index: str, layout: BandLayout, user_properties: dict[str, Any] | None = None,
            *, shards: int = 1, search: SearchText = DEFAULT_SEARCH, replace: bool = True,
            fingerprint: dict[str, Any] | None = None, fill: Fill | None = None) -> dict[str, Any]:
    """Put the template (only if missing or different) and create the index if missing; report what was done.

    ``user_properties=None`` keeps the item mapping of an installed template.  With ``replace=False``
    an installed template is never changed (``template_action: "kept"``), as the backend does on start
    so it cannot undo an administrator's ``es install``; on an index that exists it is not even read
    (a crawler then needs no privilege on templates).  Raises :class:`LayoutMismatchError` or
    :class:`EsIndexError` when an existing index does not fit, before anything is changed.
    ``fingerprint`` (``scrapy_zhdedup.fingerprint_settings``) is recorded in a new index and checked on an existing one.
    The key registry (``<index>-keys``) is created before a new index; an existing index without a complete
    one is refused with ``replace=False`` and, with ``replace``, upgraded: ``fill`` (backend/registry.py)
    claims its originals' keys.
    """
    return drive(client, _install(index, layout, user_properties, shards, search, replace, fingerprint, fill))


async def ainstall(client: AsyncElasticsearch, index: str, layout: BandLayout,
                   user_properties: dict[str, Any] | None = None, *, shards: int = 1,
                   search: SearchText = DEFAULT_SEARCH, replace: bool = True,
                   fingerprint: dict[str, Any] | None = None) -> dict[str, Any]:
    return await adrive(client, _install(index, layout, user_properties, shards, search, replace, fingerprint, None))


def read_meta(client: Elasticsearch, index: str) -> dict[str, Any] | None:
    """``_meta.zhdedup`` of the index mapping; None if the index is missing or has none."""
    return drive(client, _read_meta(index))


def ensure_layout(client: Elasticsearch, index: str, layout: BandLayout) -> None:
    """Raise :class:`LayoutMismatchError` / :class:`EsIndexError` unless the index exists and fits ``layout``."""
    drive(client, _ensure_layout(index, layout))


def status(client: Elasticsearch, index: str, layout: BandLayout | None = None) -> dict[str, Any]:
    """Installed template version vs this package's, layouts, doc and cluster counts, and any problem."""
    return drive(client, _status(index, layout))
