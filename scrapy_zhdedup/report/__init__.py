"""``zhdedup report``: the verdicts and texts gathered from a scan, a store or an index (``findings.py``),
and the one HTML page that shows them (``page.py``, ``report.html``)."""
