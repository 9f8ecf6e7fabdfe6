"""Elasticsearch clients built from :class:`EsConfig`, and a start-up check with a useful error.

Unreachable nodes are the most common set-up mistake; a bare ``ConnectionError`` deep inside the first
lookup says neither which URL was tried nor what to do, so every entry point checks once at start.
The check uses ``cluster.health``: the minimal distribution has no ``GET /`` (``info``/``ping``).
"""

from __future__ import annotations

from functools import cache
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

from elastic_transport import Serializer, TransportError
from elasticsearch import ApiError, AsyncElasticsearch, Elasticsearch
from elasticsearch.serializer import DEFAULT_SERIALIZERS, JsonSerializer

from scrapy_zhdedup.config import EsConfig
from scrapy_zhdedup.errors import ConfigError

from .errors import EsUnavailableError

CLIENT_RETRIES = 3  # immediate client-level retries on timeouts and connection errors
CHECK_TIMEOUT = 10.0  # seconds for the start-up health check


def split_credentials(url: str) -> tuple[str, str, str]:
    """``http://user:pw@host:9200`` → (``http://host:9200``, user, password).

    Credentials never stay in the URL the client is given: the transport puts its node URL in log
    lines and error messages, and a password must not appear in either.
    """
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url, "", ""
    host = parts.hostname or ""
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    netloc = f"{host}:{parts.port}" if parts.port is not None else host
    return (urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment)),
            unquote(parts.username or ""), unquote(parts.password or ""))


def redact(url: str) -> str:
    """The URL as it may be printed: without its credentials."""
    return split_credentials(url)[0]


def client_options(cfg: EsConfig, *, max_retries: int = CLIENT_RETRIES) -> dict[str, Any]:
    """Constructor arguments shared by the sync and async clients."""
    if not cfg.es_url:
        raise ConfigError("ZHDEDUP_ES_URL is empty: set it to the node's URL, e.g. http://127.0.0.1:9200")
    url, url_user, url_password = split_credentials(cfg.es_url)
    if url_user and (cfg.es_user or cfg.es_password):
        raise ConfigError("credentials are given both in ZHDEDUP_ES_URL and in ZHDEDUP_ES_USER/ZHDEDUP_ES_PASSWORD")
    user, password = (url_user, url_password) if url_user else (cfg.es_user, cfg.es_password)
    if cfg.es_api_key and (user or password):
        raise ConfigError("set either ZHDEDUP_ES_API_KEY or ZHDEDUP_ES_USER/ZHDEDUP_ES_PASSWORD, not both")
    if password and not user:
        raise ConfigError("ZHDEDUP_ES_PASSWORD is set but ZHDEDUP_ES_USER is empty")
    options: dict[str, Any] = {
        "hosts": [url],
        "request_timeout": cfg.es_timeout,
        "max_retries": max_retries,
        "retry_on_timeout": max_retries > 0,
        "serializers": serializers(),
    }
    if user:
        options["basic_auth"] = (user, password)
    if cfg.es_api_key:
        options["api_key"] = cfg.es_api_key
    if cfg.es_ca_certs:
        options["ca_certs"] = cfg.es_ca_certs
    return options


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


def make_client(cfg: EsConfig, *, max_retries: int = CLIENT_RETRIES) -> Elasticsearch:
    return Elasticsearch(**client_options(cfg, max_retries=max_retries))


def make_async_client(cfg: EsConfig, *, max_retries: int = CLIENT_RETRIES) -> AsyncElasticsearch:
    """Async client; pass ``max_retries=0`` when the caller retries with its own backoff."""
    return AsyncElasticsearch(**client_options(cfg, max_retries=max_retries))


def _unavailable(url: str, exc: Exception) -> EsUnavailableError:
    if isinstance(exc, ApiError) and exc.meta.status in (401, 403):
        hint = "check ZHDEDUP_ES_USER/ZHDEDUP_ES_PASSWORD or ZHDEDUP_ES_API_KEY"
        what = f"refused the credentials (HTTP {exc.meta.status})"
    elif isinstance(exc, ApiError):
        hint = "check that the URL points at an Elasticsearch node"
        what = f"answered the health check with HTTP {exc.meta.status}"
    else:
        hint = ("start the node (for a local test node: scripts/es-node.sh start) or set ZHDEDUP_ES_URL "
                "(--url) to a running one; for https also check ZHDEDUP_ES_CA_CERTS")
        what = "is not reachable"
    return EsUnavailableError(f"Elasticsearch at {redact(url)} {what}: {exc}. {hint}")


def check_reachable(client: Elasticsearch, url: str) -> None:
    """Raise :class:`EsUnavailableError` naming ``url`` unless the node answers a health check."""
    try:
        client.options(request_timeout=CHECK_TIMEOUT, max_retries=0).cluster.health()
    except (TransportError, ApiError) as exc:
        raise _unavailable(url, exc) from exc


async def acheck_reachable(client: AsyncElasticsearch, url: str) -> None:
    """Async twin of :func:`check_reachable`."""
    try:
        await client.options(request_timeout=CHECK_TIMEOUT, max_retries=0).cluster.health()
    except (TransportError, ApiError) as exc:
        raise _unavailable(url, exc) from exc
