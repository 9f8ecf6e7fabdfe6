"""``zhdedup``, the command line: ``main.py`` (the parser, exit codes), the ``scan`` and ``report`` commands
and the progress bar; ``zhdedup es …`` is mounted from ``es_plugin``.  What they read and write is in
``scrapy_zhdedup.files``."""
