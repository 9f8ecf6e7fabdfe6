"""The Elasticsearch side of scrapy-zhdedup, on core REST APIs only (no jar plugin, no painless)."""
