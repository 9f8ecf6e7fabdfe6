"""``ZHDEDUP_ES_URL`` / ``--url``: one Elasticsearch node URL, or the nodes of a cluster separated by commas.

Checked where the setting is read (:class:`~scrapy_zhdedup.config.EsConfig`), so a URL the client cannot
use is one line naming it when a command or a crawl starts, not the client's ``ValueError`` from deep
inside the first request.  The rules are the client's, said in our words: a scheme, ``http`` or
``https``; a host; a port for ``http`` (no default is guessed: 80 is HTTP's, 9200 Elasticsearch's);
``https`` without a port is 443, as the client takes it (a managed cluster behind a proxy).
Credentials in a URL are split off here (:func:`node_urls`), and :func:`redact` is how a URL is printed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit, urlunsplit

from .errors import ConfigError

SETTING = "ZHDEDUP_ES_URL (--url)"
# A comma followed by the next URL's scheme separates two URLs; any other comma belongs to its URL (one
# in a password, say), which is then checked as it stands.
_SEPARATOR = re.compile(r"\s*,\s*(?=[A-Za-z][A-Za-z0-9+.-]*://)")
_PORT_AT_END = re.compile(r":\d+$")


@dataclass(frozen=True)
class NodeUrl:
    """One node: its URL without credentials (what the client gets and messages print), and the user and
    password the URL carried (empty if none)."""

    url: str
    user: str = ""
    password: str = field(default="", repr=False)


def split(value: str) -> list[str]:
    """The URLs of a setting, as written."""
    return _SEPARATOR.split(value.strip())


def redact(value: str) -> str:
    """The setting as it may be printed: each URL without its credentials.  Everything up to the last
    ``@`` after the scheme goes, so a password holding ``/`` or ``#`` is not printed either."""
    shown = []
    for url in split(value):
        scheme, sep, rest = url.partition("//")
        shown.append(scheme + sep + rest.rpartition("@")[2] if sep else url.rpartition("@")[2])
    return ",".join(shown)


def node_urls(value: str) -> list[NodeUrl]:
    """Every node of the setting; ConfigError, naming the URL (without credentials), for one that is not
    a node URL, or for URLs carrying different credentials."""
    if not value.strip():
        raise ConfigError(f"{SETTING} is empty: set it to the node's URL, e.g. http://127.0.0.1:9200")
    nodes = [_node_url(url) for url in split(value)]
    if len({(n.user, n.password) for n in nodes if n.user or n.password}) > 1:
        raise ConfigError(f"{SETTING}: its URLs carry different credentials; give them once, in "
                          f"ZHDEDUP_ES_USER and ZHDEDUP_ES_PASSWORD")
    return nodes


def _node_url(url: str) -> NodeUrl:
    shown = redact(url)

    def refused(why: str) -> ConfigError:
        return ConfigError(f"{SETTING}: {shown!r} is not a node URL: {why}")

    if "://" not in url:
        example = shown if _PORT_AT_END.search(shown) else f"{shown}:9200"
        raise refused(f"it has no scheme; write http://{example} (https:// with TLS)")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise refused(f"the scheme must be http or https, not {parts.scheme!r}")
    try:
        port = parts.port
    except ValueError:
        several = " (several URLs are separated by commas, each with its scheme)" if "," in url else ""
        raise refused(f"its port is not a number from 1 to 65535{several}") from None
    host = parts.hostname
    if not host:
        raise refused("it has no host")
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    netloc = host if port is None else f"{host}:{port}"
    if port is None and parts.scheme == "http":
        raise refused(f"it has no port; write {urlunsplit(('http', f'{netloc}:9200', parts.path, '', ''))} "
                      f"(Elasticsearch's port; an http URL without one is not taken to mean 80 or 9200)")
    if port == 0:
        raise refused("its port is not a number from 1 to 65535")
    return NodeUrl(urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment)),
                   unquote(parts.username or ""), unquote(parts.password or ""))
