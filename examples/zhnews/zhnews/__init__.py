"""Example Scrapy project: crawl a local Chinese news site through the scrapy-zhdedup pipeline."""
