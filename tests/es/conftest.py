"""Tests that need a real Elasticsearch node (marker ``es``): the shared node of scripts/es-node.sh (or
``$ZHDEDUP_TEST_ES_URL``), and the modules that start their own, once each: the 3-node cluster (``cluster``)
and the node with security and TLS (``security``)."""

from pathlib import Path

import pytest

from tests.support.backend_texts import texts
from tests.support.es_node import es_client, es_url, index
from tests.support.markers import require_marker

# the shared node's fixtures, and real articles with a repost the engine judges near
__all__ = ["es_client", "es_url", "index", "texts"]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    require_marker(items, Path(__file__).parent, "es")
