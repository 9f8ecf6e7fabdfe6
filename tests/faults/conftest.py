"""The fault suites (marker ``fault``): kill -9, restarts, read-only indices, full disks, two writers, against
real processes; those on Elasticsearch (also marked ``es``) use the shared node and a node of their own that
they may kill (tests/support/fault_node.py)."""

from tests.support.es_node import es_client, es_url, index

__all__ = ["es_client", "es_url", "index"]  # the shared node's fixtures
