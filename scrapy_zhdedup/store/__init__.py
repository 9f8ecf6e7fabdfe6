"""The embedded store, the memory of judged documents (``memory/``) kept in a directory (``embedded.py``),
and its files: the append-only log (``log.py``), the one-writer lock (``lock.py``), ``store.json``
(``meta.py``) and the snapshot (``snapshot.py``)."""
