"""``ZHDEDUP_BACKEND = "elasticsearch"``: judging against a shared index (``elasticsearch_backend.py``).

The coordinator (``judging.py``) looks up items that arrive together together (``groupcommit.py``,
``lookups.py``) and decides them in arrival order; what a verdict writes (``writes.py``) waits in a
buffer until searches can see them (``buffer.py``), kept on disk meanwhile (``journal.py``), and is
written by ``batchwriter.py`` through the one bulk path (``writer.py``, ``retry.py``, ``stats.py``);
what cannot be judged or stored goes to the dead-letter file (``deadletter.py``).
"""
