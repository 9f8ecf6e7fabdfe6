"""The embedded store, what is remembered when no server is configured (``embedded.py``), and its files:
the append-only log (``log.py``), the one-writer lock (``lock.py``), ``store.json`` (``meta.py``) and the
snapshot (``snapshot.py``)."""
