"""Which server answers (Elasticsearch 7.10 to 9, OpenSearch 2 and 3), and the one seam through which every
client family speaks to it.

The code is written once against elasticsearch-py 8/9's calls, answers and exceptions: operations.py's
steps, the store, the commands.  Elasticsearch 8 and 9 are spoken to by that client itself; Elasticsearch
7.x by ``elasticsearch7`` and OpenSearch by ``opensearch-py``, each behind :class:`LegacyClient`, which takes
the same calls (body fields as keyword arguments), gives the same answers (``.body``, ``["key"]``) and
raises the same exceptions (``ApiError`` with ``.meta.status``, elastic_transport's ``ConnectionError``), so
no part of the backend exists twice and a call added anywhere works on every flavour.  elasticsearch-py is
installed with every extra for those types; it talks only to Elasticsearch 8 and 9.

The server is asked once, at start (:func:`detect`), so an environment with several clients installed
still uses the one that fits, and one without it says in one line which extra to install.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from elastic_transport import (
    ApiResponseMeta,
    ConnectionError,
    ConnectionTimeout,
    HeadApiResponse,
    HttpHeaders,
    ListApiResponse,
    NodeConfig,
    ObjectApiResponse,
    SerializationError,
    SerializerCollection,
    TextApiResponse,
    TlsError,
)
from elasticsearch import ApiError, AsyncElasticsearch, Elasticsearch
from elasticsearch.exceptions import HTTP_EXCEPTIONS

from .errors import ClientMismatchError
from .operations import Steps

logger = logging.getLogger("es_plugin.client")  # the failover lines are the client's, whichever family

ELASTICSEARCH, OPENSEARCH = "Elasticsearch", "OpenSearch"
OLDEST = {ELASTICSEARCH: (7, 10), OPENSEARCH: (2, 0)}  # older servers lack APIs the index needs


@dataclass(frozen=True)
class Server:
    """What :func:`detect` found: the product, its version (``()`` when the user may not read it) and, for
    Elasticsearch 7.x, whether it is the default distribution (x-pack) or an OSS build."""

    product: str
    version: tuple[int, ...]
    xpack: bool = True

    def __str__(self) -> str:
        version = ".".join(map(str, self.version)) or "(version not readable by this user)"
        return f"{self.product} {version}{'' if self.xpack else ' (OSS build)'}"

    @property
    def point_in_time(self) -> bool:
        """Whether it can open a point in time: Elasticsearch 7.10+ with x-pack, OpenSearch 2.4+."""
        if self.product == OPENSEARCH:
            return self.version >= (2, 4)
        return self.xpack and (not self.version or self.version >= (7, 10))

    @property
    def shard_doc(self) -> bool:
        """Whether a point in time's search sorts on ``_shard_doc`` (Elasticsearch 7.12+; OpenSearch 2.19 has
        no such field)."""
        return self.product == ELASTICSEARCH and self.point_in_time and (not self.version or self.version >= (7, 12))

    @property
    def collapse_search_after(self) -> bool:
        """Whether a collapsed search pages with ``search_after`` (Elasticsearch 8+; 7.x and OpenSearch refuse it)."""
        return self.product == ELASTICSEARCH and (not self.version or self.version >= (8,))

    @property
    def has_privileges(self) -> bool:
        """Whether ``_security/user/_has_privileges`` may exist (Elasticsearch with x-pack; OpenSearch's security
        plugin has no such call)."""
        return self.product == ELASTICSEARCH and self.xpack


@dataclass(frozen=True)
class Family:
    """A client family: its module, the extra that installs it, and the servers it speaks to."""

    module: str
    extra: str
    requirement: str

    def installed(self) -> bool:
        return importlib.util.find_spec(self.module) is not None


ES = Family("elasticsearch", "es", "elasticsearch[async,orjson]>=8.13,<10")
ES7 = Family("elasticsearch7", "es7", "elasticsearch7[async]>=7.17,<8")
OS = Family("opensearchpy", "opensearch", "opensearch-py[async]>=3,<4")


def family_for(server: Server) -> Family:
    """The client family that speaks to ``server``; :class:`ClientMismatchError` naming the extra to install
    when it is not installed or the server is older than the project supports."""
    if server.version and server.version < OLDEST[server.product]:
        oldest = ".".join(map(str, OLDEST[server.product]))
        raise ClientMismatchError(f"{server} is older than scrapy-zhdedup supports ({server.product} {oldest} or newer)")
    family = OS if server.product == OPENSEARCH else ES7 if server.version[:1] == (7,) else ES
    if not family.installed():
        raise ClientMismatchError(f"the server is {server}; its client is not installed: "
                                  f"pip install 'scrapy-zhdedup[{family.extra}]'")
    if family is ES and server.version:
        import elasticsearch

        client = int(elasticsearch.__versionstr__.split(".", 1)[0])
        if server.version[0] not in (client, client + 1):  # a client of major N speaks to N and N+1
            raise ClientMismatchError(f"the server is {server}, but the installed elasticsearch client is "
                                      f"{elasticsearch.__versionstr__}; pip install "
                                      f"'elasticsearch[async,orjson]>={server.version[0]},<{server.version[0] + 1}'")
    return family


def _numbers(version: str) -> tuple[int, ...]:
    return tuple(int(n) for n in re.findall(r"\d+", version.split("-", 1)[0])[:3])


def detect(timeout: float) -> Steps:
    """Steps (run by an elasticsearch-py client, sync or async) returning the :class:`Server` at its URL, asked
    through its transport (which, unlike its API, neither pins the major version in its headers nor refuses
    what is not Elasticsearch).

    ``GET /`` tells product and version on Elasticsearch 7.x and OpenSearch; the minimal distributions of
    Elasticsearch 8 and 9 answer it 405 (no rest-root module), and then ``GET _nodes/_local`` tells the
    version.  A user without the ``monitor`` privilege may read neither (the README's least-privilege
    role): the 403 of Elasticsearch's security layer carries no product header, so a 403 is taken as
    Elasticsearch, of a version left unknown.  A request that fails is raised as elasticsearch-py raises
    it (ApiError, ConnectionError)."""
    root = yield lambda c: _get(c, "/", timeout)
    body = root.body if isinstance(root.body, Mapping) else {}
    if root.meta.status < 300 and isinstance(body.get("version"), Mapping):
        version = body["version"]
        product = OPENSEARCH if version.get("distribution") == "opensearch" else ELASTICSEARCH
        return Server(product, _numbers(str(version.get("number", ""))), version.get("build_flavor") != "oss")
    if root.meta.status in (404, 405):
        nodes = yield lambda c: _get(c, "/_nodes/_local?filter_path=nodes.*.version", timeout)
        if nodes.meta.status < 300 and isinstance(nodes.body, Mapping) and nodes.body.get("nodes"):
            return Server(ELASTICSEARCH, _numbers(next(iter(nodes.body["nodes"].values()))["version"]))
        root = nodes
    if root.meta.status == 403:  # no ``monitor``: Elasticsearch's security answers without the product header
        return Server(ELASTICSEARCH, ())
    raise HTTP_EXCEPTIONS.get(root.meta.status, ApiError)(message=_reason(root.body), meta=root.meta, body=root.body)


def _get(client: Elasticsearch | AsyncElasticsearch, path: str, timeout: float) -> Any:
    """``GET path`` on the transport: every answer returned, whatever its status (an awaitable of it on the
    async client).  The transport sends none of the client's headers, so its credentials go along here."""
    headers = {"accept": "application/json"}
    auth = client._headers.get("authorization")  # set by the client from basic_auth / api_key
    if auth:
        headers["authorization"] = auth
    return client.transport.perform_request("GET", path, headers=headers,
                                            request_timeout=timeout,
                                            max_retries=len(client.transport.node_pool.all()) - 1)


def _reason(body: Any) -> str:
    error = body.get("error") if isinstance(body, Mapping) else body
    return str((error.get("reason") or error.get("type")) if isinstance(error, Mapping) else error)


# --- the legacy clients behind elasticsearch-py's conventions ---------------------------------------------

# elasticsearch-py 8/9 takes a request body's fields as keyword arguments; elasticsearch7 and opensearch-py
# take them in ``body``. These are the fields of the calls the project makes (any API), by 8.x's names.
BODY_FIELDS = frozenset({
    "query", "aggs", "aggregations", "sort", "search_after", "pit", "collapse", "track_total_hits", "_source",
    "highlight", "post_filter", "min_score", "runtime_mappings", "slice", "docs", "ids", "properties",
    "dynamic", "settings", "mappings", "aliases", "index_patterns", "template", "priority", "composed_of",
    "_meta", "script", "doc", "upsert", "doc_as_upsert", "max_docs",
})
RENAMED = {"meta": "_meta", "source": "_source", "from_": "from", "source_includes": "_source_includes",
           "source_excludes": "_source_excludes"}
WHOLE_BODY = frozenset({"operations", "searches", "document"})  # 8.x's names for a body that is not an object
# Calls whose every argument but these is a body field (their names collide with path parameters elsewhere).
BODY_ONLY = {"security.has_privileges": frozenset({"user"})}


def _request(api: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """``kwargs`` of an elasticsearch-py 8/9 call as elasticsearch7 and opensearch-py take them."""
    kept = BODY_ONLY.get(api)
    out: dict[str, Any] = {}
    body: dict[str, Any] = dict(kwargs.pop("body", None) or {})
    for name, value in kwargs.items():
        name = RENAMED.get(name, name)
        if name in WHOLE_BODY:
            out["body"] = value
        elif (name in BODY_FIELDS and kept is None) or (kept is not None and name not in kept):
            body[name] = value
        else:
            out[name] = value
    if body:
        out["body"] = body
    return out


def _seconds(duration: Any) -> float:
    """A server-side duration (``"60s"``, ``"500ms"``, ``"2m"``) in seconds."""
    number, unit = re.fullmatch(r"(\d+(?:\.\d+)?)(ms|s|m)?", str(duration)).groups()  # type: ignore[union-attr]
    return float(number) * {"ms": 0.001, "s": 1.0, "m": 60.0, None: 1.0}[unit]


@cache
def _meta(status: int) -> ApiResponseMeta:
    """Response metadata for an answer of a legacy client, which returns bodies only."""
    return ApiResponseMeta(status=status, http_version="1.1", headers=HttpHeaders(), duration=0.0,
                           node=NodeConfig("http", "localhost", 80))


def _answer(value: Any) -> Any:
    """A legacy client's answer as elasticsearch-py 8/9 gives it."""
    if isinstance(value, bool):
        return HeadApiResponse(meta=_meta(200 if value else 404))
    if isinstance(value, Mapping):
        return ObjectApiResponse(body=value, meta=_meta(200))
    if isinstance(value, list):
        return ListApiResponse(body=value, meta=_meta(200))
    if isinstance(value, str):
        return TextApiResponse(body=value, meta=_meta(200))
    return value


def _exception(exc: Exception, native: Any) -> Exception:
    """A legacy client's exception as elasticsearch-py 8/9 raises it (the original as its cause)."""
    errors = native.exceptions
    if isinstance(exc, errors.ConnectionTimeout):
        return ConnectionTimeout(str(exc))
    if isinstance(exc, errors.SSLError):
        return TlsError(str(exc))
    if isinstance(exc, errors.ConnectionError):
        return ConnectionError(str(exc))
    if isinstance(exc, errors.SerializationError):
        return SerializationError(str(exc))
    if isinstance(exc, errors.TransportError) and isinstance(exc.status_code, int):
        return HTTP_EXCEPTIONS.get(exc.status_code, ApiError)(message=str(exc.error), meta=_meta(exc.status_code),
                                                              body=exc.info)
    return exc


@dataclass(frozen=True)
class _Transport:
    """What the store reads of elasticsearch-py's transport: the serializers it checks documents with."""

    serializers: SerializerCollection


@dataclass(frozen=True)
class Dialect:
    """How one legacy family differs: its module, and the calls it names or shapes otherwise."""

    module: Any
    calls: Mapping[str, Callable[..., Any]]  # api name -> (native client, kwargs) -> native call's result


def _pit_es7(native: Any, id: str, **kwargs: Any) -> Any:
    return native.close_point_in_time(body={"id": id}, **kwargs)


def _pit_os_open(native: Any, **kwargs: Any) -> Any:
    """OpenSearch's point in time (2.4+) answers ``pit_id``; searches name it as Elasticsearch's do."""
    answer = native.create_pit(**kwargs)

    async def later() -> Any:
        return {"id": (await answer)["pit_id"]}

    return later() if inspect.isawaitable(answer) else {"id": answer["pit_id"]}


def _pit_os_close(native: Any, id: str, **kwargs: Any) -> Any:
    return native.delete_pit(body={"pit_id": [id]}, **kwargs)


@cache
def dialect(family: Family) -> Dialect:
    module = importlib.import_module(family.module)
    if family is OS:
        return Dialect(module, {"open_point_in_time": _pit_os_open, "close_point_in_time": _pit_os_close})
    return Dialect(module, {"close_point_in_time": _pit_es7})


class LegacyClient:
    """An elasticsearch7 or opensearch-py client (sync or async) taking elasticsearch-py 8/9's calls, giving
    its answers and raising its exceptions: see the module's docstring.  ``options(request_timeout=…,
    ignore_status=…)`` is kept for every later call (per-call retries they do not take: theirs, as made)."""

    def __init__(self, native: Any, family: Family, server: Server, transport: _Transport,
                 defaults: Mapping[str, Any] | None = None, path: str = "") -> None:
        self._native, self._family, self.server, self.transport = native, family, server, transport
        self._defaults, self._path = dict(defaults or {}), path
        self._dialect = dialect(family)

    def options(self, *, request_timeout: float | None = None, ignore_status: int | tuple[int, ...] | None = None,
                **_others: Any) -> LegacyClient:
        defaults = dict(self._defaults)
        if request_timeout is not None:
            defaults["request_timeout"] = request_timeout
        if ignore_status is not None:
            defaults["ignore"] = ignore_status  # answered as a body, not raised: theirs is named ignore
        return LegacyClient(self._native, self._family, self.server, self.transport, defaults, self._path)

    def __getattr__(self, name: str) -> Any:
        api = f"{self._path}.{name}" if self._path else name
        special = self._dialect.calls.get(api)
        target = getattr(self._native, name, None) if special is None else special
        if target is None:
            raise AttributeError(f"{self._family.module} has no call {api!r}")
        if special is None and not callable(target):  # a namespace: indices, cluster, security
            return LegacyClient(target, self._family, self.server, self.transport, self._defaults, api)

        def call(**kwargs: Any) -> Any:
            request = _request(api, {**self._defaults, **kwargs})
            if self._family is OS and "timeout" in request:
                # opensearch-py takes any `timeout` for the client's own and cannot send the server's (how long
                # it may wait): the client waits that long instead, the server its default.
                request.setdefault("request_timeout", _seconds(request.pop("timeout")))
            try:
                result = special(self._native, **request) if special is not None else target(**request)
            except Exception as exc:
                raise _exception(exc, self._dialect.module) from exc
            if inspect.isawaitable(result):
                return self._later(result)
            return _answer(result)

        return call

    async def _later(self, result: Any) -> Any:
        try:
            return _answer(await result)
        except Exception as exc:
            raise _exception(exc, self._dialect.module) from exc



def server_of(client: Any) -> Server:
    """The server a client of :mod:`es_plugin.client` speaks to: a legacy client knows it (an async one through
    client.AsyncClient); elasticsearch-py's own client speaks to Elasticsearch 8 or 9, which has every
    feature the project uses."""
    server = getattr(client, "server", None)
    return server if isinstance(server, Server) else Server(ELASTICSEARCH, ())


class FailoverLog:
    """The one-line messages of a pool of several nodes (every family's): a node failed and its requests went
    to another, told once another node has answered (so nothing precedes the one-line error of a run whose
    every node is down); and that it answers again."""

    def __init__(self) -> None:
        self._failed: dict[str, bool] = {}  # node URL -> whether its failure was told

    def dead(self, url: str, several: bool) -> None:
        if several:
            self._failed.setdefault(url, False)

    def live(self, url: str) -> None:
        """After every request that succeeded, on the node ``url``."""
        if not self._failed:
            return
        if self._failed.pop(url, False):
            logger.warning("zhdedup: Elasticsearch node %s answers again", url)
        for failed, told in self._failed.items():
            if not told:
                self._failed[failed] = True
                logger.warning("zhdedup: Elasticsearch node %s failed a request, which went to another node; "
                               "the others take its requests until it answers again", failed)


@cache
def _failover_pool(module: Any) -> type:
    """The legacy family's pool of nodes, telling its failovers as :class:`FailoverLog` does."""
    base = importlib.import_module(f"{module.__name__}.connection_pool").ConnectionPool

    class LegacyFailoverPool(base):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._log = FailoverLog()

        def mark_dead(self, connection: Any, now: float | None = None) -> None:
            super().mark_dead(connection, now)
            self._log.dead(connection.host, len(self.orig_connections) > 1)

        def mark_live(self, connection: Any) -> None:
            super().mark_live(connection)
            self._log.live(connection.host)

    return LegacyFailoverPool


def legacy_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """elasticsearch-py 8/9's constructor arguments (client.client_options) as elasticsearch7's and
    opensearch-py's: the same nodes, credentials, CA, timeout and retries."""
    out: dict[str, Any] = {"hosts": list(options["hosts"]), "timeout": options["request_timeout"],
                           "max_retries": options["max_retries"],
                           "retry_on_timeout": options.get("retry_on_timeout", False)}
    if "retry_on_status" in options:
        out["retry_on_status"] = tuple(options["retry_on_status"])
    if "basic_auth" in options:
        out["http_auth"] = options["basic_auth"]
    if "api_key" in options:
        out["api_key"] = options["api_key"]
    if "ca_certs" in options:
        out["ca_certs"] = options["ca_certs"]
    return out


def make_legacy(family: Family, server: Server, options: Mapping[str, Any], *, asynchronous: bool) -> LegacyClient:
    """A legacy family's client for ``server``, from elasticsearch-py 8/9's constructor arguments."""
    module = dialect(family).module
    name = ("AsyncElasticsearch" if asynchronous else "Elasticsearch") if family is ES7 else \
        ("AsyncOpenSearch" if asynchronous else "OpenSearch")
    native = getattr(module, name)(**legacy_options(options), connection_pool_class=_failover_pool(module))
    if family is ES7:
        # elasticsearch7 refuses 7.0-7.13 OSS builds (7.10.2, the last Apache-2.0 release, among them) by its
        # own check of GET /; detect() has checked what the server is, so its check is marked done.
        native.transport._verified_elasticsearch = True
    return LegacyClient(native, family, server, _Transport(SerializerCollection(options["serializers"])))
