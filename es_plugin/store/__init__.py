"""``ZHDEDUP_BACKEND = "elasticsearch"``: judging against a shared index (``backend.py``).

Items that arrive together are looked up together (``groupcommit.py``, ``lookups.py``); verdicts wait in
a buffer until searches can see them (``buffer.py``), kept on disk meanwhile (``journal.py``), and are
written by the one bulk path (``writer.py``, ``retry.py``, ``stats.py``); what cannot be judged or
stored goes to the dead-letter file (``deadletter.py``).
"""
