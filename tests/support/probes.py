"""Steps that worker processes run to tell the tests what they inherited (imported as a module by the workers,
so it imports nothing heavy itself)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from scrapy_zhdedup.similarity.fingerprinter import Fingerprinter


def inherited(fingerprinter: Fingerprinter, item: int) -> bool:
    """Whether the worker has ``xml.dom.minidom``: imported by the parent before the pool starts, by nothing
    in a worker, so it is there only if the worker was forked from the parent."""
    return "xml.dom.minidom" in sys.modules
