"""``zhdedup``, the command line: ``main.py`` (the parser, exit codes), the ``scan`` and ``report`` commands
and the progress bar; ``zhdedup es …`` is mounted from ``es_plugin``.  What they read and write is in
``scrapy_zhdedup.files``."""

import os

# Before numpy is loaded (the package's __init__ does not load it): the commands' numpy work is on small arrays,
# a chunk at a time, where OpenBLAS's helper threads only spin: ~0.1 s of CPU in every process (issue 40).  A
# value the user set is kept.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
