"""Integration tests: the programs a user runs (the CLI, crawls, worker pools, the example, the scripts) as
other processes, without an Elasticsearch node: the node's URL (``$ZHDEDUP_TEST_ES_URL``) is hidden from
them and from what they start; a test that needs a node belongs in tests/es/."""

from __future__ import annotations

import pytest

from tests.support.es_node import URL_ENV


@pytest.fixture(autouse=True)
def _no_node(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(URL_ENV, raising=False)
