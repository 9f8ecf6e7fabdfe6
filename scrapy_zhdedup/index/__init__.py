"""In-memory indexes that name candidates by exact key lookups, never by a pairwise scan: the compact
integer multimap under every key table (``multimap.py``), SimHash band keys and their index (``bands.py``,
``bandindex.py``), and the near index the stores share (``nearindex.py``)."""
