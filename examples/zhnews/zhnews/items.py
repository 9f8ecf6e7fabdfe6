"""The article item.  With ``ZHDEDUP_MODE = "annotate"`` the pipeline writes five fields into
each item, and a ``scrapy.Item`` only accepts declared fields, so they are declared here."""

from __future__ import annotations

import scrapy


class NewsItem(scrapy.Item):
    url = scrapy.Field()
    title = scrapy.Field()
    site = scrapy.Field()
    html = scrapy.Field()  # the whole page; the pipeline extracts the article text itself
    # set by scrapy_zhdedup.pipelines.ZhDedupPipeline (names from ZHDEDUP_FIELDS)
    dedup_status = scrapy.Field()  # "unique" | "exact" | "near"
    dup_of = scrapy.Field()  # url of the earlier page this one repeats
    dup_similarity = scrapy.Field()  # estimated overlap with dup_of: what decided (1.0 for exact repeats)
    dup_distance = scrapy.Field()  # Hamming distance of the fingerprints, for reference (0 for exact repeats)
    cluster_id = scrapy.Field()  # url of the first page of the cluster
