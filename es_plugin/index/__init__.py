"""The Elasticsearch index: the template that gives it its ``zhdedup`` fields and the checks that it fits
a client (``template.py``), and how Chinese is mapped, stored and queried (``chinese.py``)."""
