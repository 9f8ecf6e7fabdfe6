"""``zhdedup``, the command line: ``main.py`` (the parser, exit codes), the ``scan`` and ``report`` commands,
their inputs (``inputs.py``: JSONL, ``.gz``, ``-``, directories of pages), output files that appear whole or
not at all (``output.py``) and the progress bar; ``zhdedup es …`` is mounted from ``es_plugin``."""
