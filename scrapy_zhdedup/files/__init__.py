"""Files every part of the project reads and writes the same way: the inputs of ``scan``, ``report`` and
``es ingest`` (``inputs.py``: JSONL, ``.gz``, ``-``, directories of pages), output files that appear whole
or not at all (``output.py``), atomic file replacement (``atomic.py``) and the per-process files a gone
writer left (``locks.py``)."""
