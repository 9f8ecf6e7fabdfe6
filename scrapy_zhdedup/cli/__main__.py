"""``python -m scrapy_zhdedup.cli``: the ``zhdedup`` command."""

import sys

from .main import main

sys.exit(main())
