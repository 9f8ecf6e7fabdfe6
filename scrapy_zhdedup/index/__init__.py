"""In-memory indexes that name candidates by exact key lookups, never by a pairwise scan: the compact
integer multimap under every key table (``multimap.py``), SimHash band keys and their index (``bands.py``,
``bandindex.py``), the near index the stores share (``nearindex.py``), and the exact-repeat Bloom filter
over content hashes (``bloom.py``)."""
