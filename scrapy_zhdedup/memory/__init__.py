"""What the engine remembers of the documents it judged, in this process (``store.py``): its indexed
documents (``rows.py``), every judgement (``entries.py``) and the record each change is (``record.py``).
The embedded store (``store/``) keeps it in a directory; ``es dedup-index`` judges an index against it."""
