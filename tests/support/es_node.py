"""Give the test session a real Elasticsearch node, and clean up only what it started; its fixtures (``es_url``,
``es_client``, ``index``) are imported by the conftest.py of the directories whose tests use the node.

Tests run against a real node rather than mocks because the duplicate lookup depends on Elasticsearch's
own behaviour (bulk ``create`` conflicts, ``terms`` on keyword band fields, ``collapse``). The node is
the minimal distribution started by ``scripts/es-node.sh``; a user's own Elasticsearch (7.10 to 9) or
OpenSearch (2, 3) can be used instead by setting ``ZHDEDUP_TEST_ES_URL``, with the client that fits it
installed (the ``es7`` / ``opensearch`` extra): the session's client is made as the commands make theirs
(es_plugin.client.make_client), so every test speaks to the server through the same seam.

The minimal distribution has no ``rest-root`` module, so ``GET /`` (``client.info()``) and ``HEAD /``
(``client.ping()``) are not available there: check reachability with ``cluster.health()`` instead.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from elasticsearch import Elasticsearch

from es_plugin.client import make_client
from es_plugin.index.template import template_name
from scrapy_zhdedup.config import EsConfig
from scrapy_zhdedup.errors import ZhDedupError
from tests.support import ROOT

URL_ENV = "ZHDEDUP_TEST_ES_URL"
SCRIPT = ROOT / "scripts" / "es-node.sh"
# A cold start downloads ~100 MB with Maven and then boots the JVM; both fit well inside this.
START_TIMEOUT_S = 600.0
STOP_TIMEOUT_S = 120.0


class EsNodeError(RuntimeError):
    """The test node could not be started, reached or stopped."""


def sigkill(pid: int, what: str) -> None:
    """SIGKILL ``pid`` (a node), as an OOM killer or a power cut would, and wait until it is gone."""
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    raise EsNodeError(f"{what} (pid {pid}) survived SIGKILL for 30 s")


@dataclass(frozen=True)
class EsNode:
    """A node the session talks to; ``started_here`` says whether the session must stop it."""

    url: str
    started_here: bool


def _run_script(command: str, timeout: float) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            ["bash", str(SCRIPT), command],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise EsNodeError(f"{SCRIPT} {command} did not finish within {timeout:.0f}s") from exc


def _script_output(command: str, timeout: float) -> str:
    proc = _run_script(command, timeout)
    if proc.returncode != 0:
        raise EsNodeError(
            f"{SCRIPT} {command} failed with exit code {proc.returncode}:\n{proc.stderr.strip()}"
        )
    return proc.stdout.strip()


def _check_client_compatible(url: str) -> None:
    """Fail early and clearly when the installed clients do not fit the server (one line naming the extra)."""
    try:
        make_client(EsConfig(es_url=url, es_timeout=60)).close()
    except ZhDedupError as exc:
        raise EsNodeError(f"{url}: {exc}; or point {URL_ENV} at another node") from exc


def acquire() -> EsNode:
    """Use ``$ZHDEDUP_TEST_ES_URL`` if set, else make sure the script's node is up."""
    url = os.environ.get(URL_ENV, "").strip().rstrip("/")
    if url:
        _check_client_compatible(url)
        return EsNode(url=url, started_here=False)
    was_running = _run_script("status", STOP_TIMEOUT_S).returncode == 0
    url = _script_output("start", START_TIMEOUT_S)
    _check_client_compatible(url)
    return EsNode(url=url, started_here=not was_running)


def release(node: EsNode) -> None:
    """Stop the node only if this session started it (a node started by the caller stays up)."""
    if node.started_here:
        _script_output("stop", STOP_TIMEOUT_S)


# --- the fixtures ---------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def es_url() -> Iterator[str]:
    """URL of a live node for the whole session; stopped at the end only if we started it."""
    try:
        node = acquire()
    except EsNodeError as exc:
        pytest.fail(str(exc), pytrace=False)
    try:
        yield node.url
    finally:
        release(node)


@pytest.fixture(scope="session")
def es_client(es_url: str) -> Iterator[Elasticsearch]:
    """Sync client on ``es_url``, shared by the session."""
    client = make_client(EsConfig(es_url=es_url, es_timeout=60))
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def index(es_client: Elasticsearch, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh, unused index name for one test; afterwards that index, any ``<name>-*`` ones and the index
    templates ``install`` made for them (``zhdedup-<name>*``) are deleted.

    The name only is given (tests create the index with the mappings they need). Derived indices are
    deleted by their concrete names, since wildcard deletes of indices are refused by default (those of
    templates are not).
    """
    test_part = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower()).strip("-")[:40]
    name = f"zhdedup-test-{test_part}-{uuid.uuid4().hex[:12]}"
    yield name
    es_client.options(ignore_status=404).indices.delete_index_template(name=template_name(f"{name}*"))
    found = es_client.indices.get(
        index=[name, f"{name}-*"], ignore_unavailable=True, allow_no_indices=True, expand_wildcards="all"
    )
    if found:
        es_client.indices.delete(index=list(found))
