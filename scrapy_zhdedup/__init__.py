"""Chinese exact and near-duplicate filtering for Scrapy, on an embedded store or Elasticsearch."""

from .config import DedupConfig, EsConfig, PipelineConfig
from .deduper import Deduper
from .errors import EmptyTextError, LayoutMismatchError, StoreError, StoreFailedError, ZhDedupError
from .model import Verdict

__all__ = [
    "DedupConfig", "Deduper", "EmptyTextError", "EsConfig", "LayoutMismatchError", "PipelineConfig",
    "StoreError", "StoreFailedError", "Verdict", "ZhDedupError",
]
__version__ = "0.1.0"
