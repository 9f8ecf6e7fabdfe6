"""Elasticsearch and OpenSearch clients built from :class:`EsConfig`, and a start-up check with a useful error.

A client is made for the server at the URL, asked once what it is (flavour.py): Elasticsearch 8/9 get
elasticsearch-py's own client, Elasticsearch 7.x and OpenSearch the ``elasticsearch7`` / ``opensearch-py``
one behind the same calls (:class:`~es_plugin.flavour.LegacyClient`); a server whose client is not
installed stops the command with one line naming the extra to install, before anything is judged.

Unreachable nodes are the most common set-up mistake; a bare ``ConnectionError`` deep inside the first
lookup says neither which URL was tried nor what to do, so every entry point checks once at start:
``_has_privileges`` on a cluster with security (which also says what the user lacks, privileges.py),
else ``cluster.health`` (the minimal distribution has no ``GET /``: ``info``/``ping``).

Several URLs (``ZHDEDUP_ES_URL``, esurl.py) are the client's host list: it sends requests to them in
turn, and a node that fails one is left out for a while (1 s, doubling up to 30 s) while the request
goes to the next, so the death of one node of a cluster costs no document.  Sniffing (asking the
cluster for its nodes) is not used: the nodes listed are the ones this process can reach (behind a
proxy or in a container the addresses a cluster publishes often are not), and with them listed the
failover needs nothing more (tests/es/test_es_cluster.py).
"""

from __future__ import annotations

import logging
import warnings
from functools import cache
from typing import Any, cast

from elastic_transport import BaseNode, NodePool, Serializer, TlsError, TransportError
from elasticsearch import ApiError, AsyncElasticsearch, Elasticsearch, ElasticsearchWarning
from elasticsearch.serializer import DEFAULT_SERIALIZERS, JsonSerializer

from scrapy_zhdedup.config import EsConfig
from scrapy_zhdedup.esurl import node_urls, redact

from .errors import EsUnavailableError, MissingPrivilegeError
from .flavour import ES, ES7, OS, FailoverLog, LegacyClient, Server, detect, family_for, make_legacy, server_of
from .operations import Steps, adrive, drive
from .privileges import Access

logger = logging.getLogger(__name__)

CLIENT_RETRIES = 3  # immediate client-level retries on timeouts and connection errors
CHECK_TIMEOUT = 10.0  # seconds for the start-up health check


def client_options(cfg: EsConfig, *, caller_retries: bool = False) -> dict[str, Any]:
    """Constructor arguments shared by the sync and async clients.

    ``caller_retries``: the caller retries with its own backoff and stats (retry.RetryPolicy), so the
    client retries nothing itself but a request whose node failed, sent at once to the next node.
    Otherwise the client retries (timeouts and 429/502/503/504 too), on every node at least once."""
    nodes = node_urls(cfg.es_url)
    url_user, url_password = next(((n.user, n.password) for n in nodes if n.user or n.password), ("", ""))
    user, password = (url_user, url_password) if url_user else (cfg.es_user, cfg.es_password)  # one source: EsConfig
    others = len(nodes) - 1
    retries: dict[str, Any] = ({"max_retries": others, "retry_on_status": (), "retry_on_timeout": False}
                               if caller_retries else {"max_retries": max(CLIENT_RETRIES, others), "retry_on_timeout": True})
    options: dict[str, Any] = {
        "hosts": [n.url for n in nodes],
        "request_timeout": cfg.es_timeout,
        "serializers": serializers(),
        "node_pool_class": FailoverPool,
        **retries,
    }
    if user:
        options["basic_auth"] = (user, password)
    if cfg.es_api_key:
        options["api_key"] = cfg.es_api_key
    if cfg.es_ca_certs:
        options["ca_certs"] = cfg.es_ca_certs
    return options


class FailoverPool(NodePool):
    """The client's pool of nodes, saying in one line when one of several failed and its requests went to
    another, and when it answers again (flavour.FailoverLog; the client's own lines about it, a traceback
    with each retry, are silenced: :func:`quiet_client_logs`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._log = FailoverLog()

    def mark_dead(self, node: BaseNode, _now: float | None = None) -> None:
        super().mark_dead(node, _now)
        self._log.dead(node.base_url, len(self.all()) > 1)

    def mark_live(self, node: BaseNode) -> None:
        """Called after every request that succeeded."""
        super().mark_live(node)
        self._log.live(node.base_url)


def quiet_client_logs() -> None:
    """Silence the client's own log lines (unless asked for: ``-v``, ``LOG_LEVEL = "DEBUG"``): an INFO
    line per request, and WARNINGs that come before our one-line error saying the same thing (a node put
    on a timeout, a retry with its traceback) or that :class:`FailoverPool` says in one line; and the
    server's deprecation warnings, which the client turns into Python warnings with a source line each."""
    logging.getLogger("elastic_transport").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", category=ElasticsearchWarning)
    # elasticsearch7 and opensearch-py log under their own names and warn with their own classes.
    for family, logger_name, warning in ((ES7, "elasticsearch", "ElasticsearchWarning"),
                                         (OS, "opensearch", "OpenSearchWarning")):
        if family.installed():
            logging.getLogger(logger_name).setLevel(logging.ERROR)
            module = __import__(f"{family.module}.exceptions", fromlist=[warning])
            warnings.filterwarnings("ignore", category=getattr(module, warning))


@cache
def serializers() -> dict[str, Serializer]:
    """The client's serializers with orjson doing every JSON and NDJSON body, when it is installed (the
    ``es`` extra installs it).  Bulk bodies and search hits are most of what the judging process encodes
    and decodes: orjson encodes a stored document ~20x and decodes a lookup's hits ~2.4x faster than
    the standard library.  Keys that are not strings are written as strings, as ``json`` does."""
    try:
        import orjson
    except ImportError:
        return dict(DEFAULT_SERIALIZERS)
    options = orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS

    def json_dumps(self: JsonSerializer, data: Any) -> bytes:
        return orjson.dumps(data, default=self.default, option=options)

    def json_loads(self: JsonSerializer, data: bytes) -> Any:
        return orjson.loads(data)

    return {mimetype: type(f"Orjson{type(s).__name__}", (type(s),), {"json_dumps": json_dumps, "json_loads": json_loads})()
            if isinstance(s, JsonSerializer) else s for mimetype, s in DEFAULT_SERIALIZERS.items()}


def make_client(cfg: EsConfig) -> Elasticsearch:
    """The client for the server at ``cfg.es_url``, asked what it is first (flavour.py):
    :class:`EsUnavailableError` if it does not answer, :class:`~es_plugin.errors.ClientMismatchError` if its
    client family is not installed.  A legacy client presents elasticsearch-py's calls, hence the cast
    (typed by the calls the code makes, not by its class)."""
    options = client_options(cfg)
    probe = Elasticsearch(**options)
    try:
        server = drive(probe, detect(CHECK_TIMEOUT))
        family = family_for(server)
    except (TransportError, ApiError) as exc:
        probe.close()
        raise _unavailable(cfg.es_url, exc) from exc
    except BaseException:
        probe.close()
        raise
    if family is ES:
        return probe
    probe.close()
    return cast(Elasticsearch, make_legacy(family, server, options, asynchronous=False))


def make_async_client(cfg: EsConfig, *, caller_retries: bool = False) -> AsyncElasticsearch:
    """Async client; ``caller_retries`` when the caller retries with its own backoff (:func:`client_options`).
    Which client it is is settled by :func:`acheck_reachable` (:class:`AsyncClient`)."""
    return cast(AsyncElasticsearch, AsyncClient(cfg.es_url, client_options(cfg, caller_retries=caller_retries)))


class AsyncClient:
    """The async client of :func:`make_async_client`, before and after the server was asked what it is.

    An async client must ask in the event loop (a sync request there would stall everything the loop
    serves until it is answered), so the asking is :func:`acheck_reachable`'s, the first thing every async
    entry point does; from then on every attribute is the client that fits the server's."""

    def __init__(self, url: str, options: dict[str, Any]) -> None:
        self._url, self._options = url, options
        self._probe = AsyncElasticsearch(**options)
        self._client: AsyncElasticsearch | LegacyClient | None = None

    async def settle(self) -> AsyncElasticsearch | LegacyClient:
        """The client that fits the server, asking it the first time (errors as :func:`make_client`'s)."""
        if self._client is None:
            try:
                server = await adrive(self._probe, detect(CHECK_TIMEOUT))
                family = family_for(server)
            except (TransportError, ApiError) as exc:
                raise _unavailable(self._url, exc) from exc
            if family is ES:
                self._client = self._probe
            else:
                await self._probe.close()
                self._client = make_legacy(family, server, self._options, asynchronous=True)
        return self._client

    def __getattr__(self, name: str) -> Any:
        if self._client is None:
            raise RuntimeError(f"the client was used ({name}) before acheck_reachable asked the server what it is")
        return getattr(self._client, name)

    async def close(self) -> None:
        await (self._client or self._probe).close()


def _unavailable(url: str, exc: Exception) -> EsUnavailableError:
    if isinstance(exc, ApiError) and exc.meta.status in (401, 403):
        hint = "check ZHDEDUP_ES_USER/ZHDEDUP_ES_PASSWORD or ZHDEDUP_ES_API_KEY"
        what = f"refused the credentials (HTTP {exc.meta.status})"
    elif isinstance(exc, ApiError):
        hint = "check that the URL points at an Elasticsearch node"
        what = f"answered the health check with HTTP {exc.meta.status}"
    elif isinstance(exc, TlsError):
        hint = "give the CA certificate that signed the node's with ZHDEDUP_ES_CA_CERTS (--ca-certs)"
        what = "failed the TLS handshake"
    else:
        hint = ("start the node (for a local test node: scripts/es-node.sh start) or set ZHDEDUP_ES_URL "
                "(--url) to a running one; for https also check ZHDEDUP_ES_CA_CERTS")
        what = "is not reachable"
    detail = exc.message if isinstance(exc, TlsError) else exc  # its str is only "TLS error"
    return EsUnavailableError(f"Elasticsearch at {redact(url)} {what}: {detail}. {hint}")


def _checking(client: Elasticsearch | AsyncElasticsearch) -> Any:
    """The client as the start-up check uses it: no retry on the node that failed, one on each other node
    (elasticsearch7 and opensearch-py take no per-call retries: theirs, as made)."""
    if isinstance(client, LegacyClient):
        return client.options(request_timeout=CHECK_TIMEOUT)
    return client.options(request_timeout=CHECK_TIMEOUT, max_retries=len(client.transport.node_pool.all()) - 1)


def _reach(url: str, access: Access | None, server: Server) -> Steps:
    """Steps: that a node answers and, on a secured cluster, that the user has what the command needs
    (``access``).  ``_has_privileges`` is the first request: it needs no privilege, and its answer says
    what is missing; a cluster without security has no such endpoint, and the health check then says
    whether the node is there (as on OpenSearch, whose security plugin has no such call, and on the OSS
    builds of Elasticsearch 7.x: there a missing permission shows at the first request that needs it)."""
    if access is not None and server.has_privileges:
        try:
            answer = yield lambda c: _checking(c).security.has_privileges(**access.request())
        except ApiError as exc:
            if exc.meta.status == 401:
                raise _unavailable(url, exc) from exc
            answer = None
        except TransportError as exc:
            raise _unavailable(url, exc) from exc
        if answer is not None:
            try:
                yield from access.check(answer.body)
            except MissingPrivilegeError as exc:
                raise MissingPrivilegeError(f"Elasticsearch at {redact(url)}: {exc}") from None
            return None
    try:
        yield lambda c: _checking(c).cluster.health()
    except (TransportError, ApiError) as exc:
        raise _unavailable(url, exc) from exc
    return None


def check_reachable(client: Elasticsearch, url: str, access: Access | None = None) -> None:
    """Raise :class:`EsUnavailableError` naming ``url`` unless a node answers, and
    :class:`~es_plugin.privileges.MissingPrivilegeError` if the user lacks what ``access`` needs."""
    drive(client, _reach(url, access, server_of(client)))


async def acheck_reachable(client: AsyncElasticsearch, url: str, access: Access | None = None) -> None:
    """Async twin of :func:`check_reachable`."""
    settled = cast(AsyncElasticsearch, await client.settle()) if isinstance(client, AsyncClient) else client
    await adrive(settled, _reach(url, access, server_of(settled)))
