"""The Scrapy integration: ``ITEM_PIPELINES = {"scrapy_zhdedup.pipelines.ZhDedupPipeline": 300}``.

The pipeline (``pipeline.py``) hands items to a backend (``backends.py``: the embedded store, or
Elasticsearch by name) and keeps a ledger of items judged but not yet delivered (``delivery.py``).
"""

from .pipeline import ZhDedupPipeline

__all__ = ["ZhDedupPipeline"]
