"""Chinese exact and near-duplicate filtering for Scrapy, on an embedded store or Elasticsearch.

The names below are imported when first used (PEP 562), so importing a submodule does not load numpy first:
the command line (``cli/__init__.py``) sets up its process before numpy is loaded.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .config import DedupConfig, EsConfig, PipelineConfig
    from .deduper import Deduper
    from .errors import EmptyTextError, LayoutMismatchError, StoreError, StoreFailedError, ZhDedupError
    from .model import Verdict

__all__ = [
    "DedupConfig", "Deduper", "EmptyTextError", "EsConfig", "LayoutMismatchError", "PipelineConfig",
    "StoreError", "StoreFailedError", "Verdict", "ZhDedupError",
]
__version__ = "0.1.0"
_MODULES = {"DedupConfig": "config", "EsConfig": "config", "PipelineConfig": "config", "Deduper": "deduper",
            "EmptyTextError": "errors", "LayoutMismatchError": "errors", "StoreError": "errors",
            "StoreFailedError": "errors", "ZhDedupError": "errors", "Verdict": "model"}


def __getattr__(name: str) -> Any:
    module = _MODULES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{module}", __name__), name)
