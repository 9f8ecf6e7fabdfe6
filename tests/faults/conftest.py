"""The fault suites (marker ``fault``): kill -9, restarts, read-only indices, full disks, two writers, against
real processes; those on Elasticsearch (also marked ``es``) use the shared node and a node of their own that
they may kill (tests/support/fault_node.py)."""

from pathlib import Path

import pytest

from tests.support.es_node import es_client, es_url, index
from tests.support.fault_fixtures import fault_node, reference, site
from tests.support.markers import require_marker

# the shared node's fixtures, and the fault suites' own (a node to kill, the corpus as a site, its verdicts)
__all__ = ["es_client", "es_url", "fault_node", "index", "reference", "site"]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    require_marker(items, Path(__file__).parent, "fault")
