"""The tests, in four directories by what a test needs, each with its own conftest.py:

* ``unit/``: the pytest process alone, no Elasticsearch node and no other process (refused there);
* ``integration/``: other processes (the CLI as a program, crawls, worker pools, the example, the scripts),
  no node;
* ``es/``: a real Elasticsearch node (marker ``es``; the 3-node cluster ``cluster``, the secured node
  ``security``);
* ``faults/``: the fault suites: kill -9, restarts, read-only indices, full disks, two writers
  (marker ``fault``).

What they share is in ``support/``, imported one way: ``from tests.support import zhtexts``,
``from tests.support.helpers import write_jsonl``.
"""
