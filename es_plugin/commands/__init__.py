"""``zhdedup es …`` (``cli.py``) and the library functions behind it: ``ingest``, ``replay`` (of the
dead-letter file), folded ``search``, ``dedup_index`` (an index already filled), ``reconcile``, ``report``;
with the resume files of the resumable ones (``checkpoint.py``) and the one way to read a whole index
(``pointintime.py``)."""
