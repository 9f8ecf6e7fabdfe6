"""Shared pytest fixtures."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator

import pytest
from elasticsearch import Elasticsearch
from es_node import EsNodeError, acquire, release

from es_plugin.index.template import template_name

# --- Elasticsearch ---------------------------------------------------------------------------------


def pytest_configure(config: pytest.Config) -> None:
    if any(line.split(":", 1)[0].strip() == "es" for line in config.getini("markers")):
        return  # already registered in pyproject.toml
    config.addinivalue_line(
        "markers",
        "es: needs a real Elasticsearch node (scripts/es-node.sh, or $ZHDEDUP_TEST_ES_URL); "
        "deselect with -m 'not es'",
    )


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
    client = Elasticsearch(es_url, request_timeout=60)
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
