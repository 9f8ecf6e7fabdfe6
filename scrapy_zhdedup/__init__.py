"""Chinese exact and near-duplicate filtering for Scrapy, on an embedded store or Elasticsearch."""

from .config import DedupConfig, EsConfig, PipelineConfig
from .engine import Deduper
from .judge import Verdict
from .errors import EmptyTextError, LayoutMismatchError, StoreError, ZhDedupError

__all__ = [
    "DedupConfig", "Deduper", "EmptyTextError", "EsConfig", "LayoutMismatchError", "PipelineConfig",
    "StoreError", "Verdict", "ZhDedupError",
]
__version__ = "0.1.0"
