"""Chinese exact and near-duplicate filtering for Scrapy, on an embedded store or Elasticsearch."""

from .config import DedupConfig, EsConfig, PipelineConfig
from .engine import Deduper
from .errors import EmptyTextError, LayoutMismatchError, StoreError, ZhDedupError
from .judge import Verdict

__all__ = [
    "DedupConfig", "Deduper", "EmptyTextError", "EsConfig", "LayoutMismatchError", "PipelineConfig",
    "StoreError", "Verdict", "ZhDedupError",
]
__version__ = "0.1.0"
