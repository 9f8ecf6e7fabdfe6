"""Elasticsearch clients built from :class:`EsConfig`, and a start-up check with a useful error.

Unreachable nodes are the most common set-up mistake; a bare ``ConnectionError`` deep inside the first
lookup says neither which URL was tried nor what to do, so every entry point checks once at start.
The check uses ``cluster.health``: the minimal distribution has no ``GET /`` (``info``/``ping``).
"""

from __future__ import annotations

from typing import Any

from elastic_transport import TransportError
from elasticsearch import ApiError, AsyncElasticsearch, Elasticsearch

from scrapy_zhdedup.config import EsConfig
from scrapy_zhdedup.errors import ConfigError, ZhDedupError

CLIENT_RETRIES = 3  # immediate client-level retries on timeouts and connection errors
CHECK_TIMEOUT = 10.0  # seconds for the start-up health check


class EsUnavailableError(ZhDedupError):
    """Elasticsearch cannot be reached, or refuses us (authentication, TLS), or stayed down past the retries."""


def client_options(cfg: EsConfig, *, max_retries: int = CLIENT_RETRIES) -> dict[str, Any]:
    """Constructor arguments shared by the sync and async clients."""
    if not cfg.es_url:
        raise ConfigError("ZHDEDUP_ES_URL is empty: set it to the node's URL, e.g. http://127.0.0.1:9200")
    if cfg.es_api_key and (cfg.es_user or cfg.es_password):
        raise ConfigError("set either ZHDEDUP_ES_API_KEY or ZHDEDUP_ES_USER/ZHDEDUP_ES_PASSWORD, not both")
    if cfg.es_password and not cfg.es_user:
        raise ConfigError("ZHDEDUP_ES_PASSWORD is set but ZHDEDUP_ES_USER is empty")
    options: dict[str, Any] = {
        "hosts": [cfg.es_url],
        "request_timeout": cfg.es_timeout,
        "max_retries": max_retries,
        "retry_on_timeout": max_retries > 0,
    }
    if cfg.es_user:
        options["basic_auth"] = (cfg.es_user, cfg.es_password)
    if cfg.es_api_key:
        options["api_key"] = cfg.es_api_key
    if cfg.es_ca_certs:
        options["ca_certs"] = cfg.es_ca_certs
    return options


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
                "(--es-url) to a running one; for https also check ZHDEDUP_ES_CA_CERTS")
        what = "is not reachable"
    return EsUnavailableError(f"Elasticsearch at {url} {what}: {exc}. {hint}")


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
