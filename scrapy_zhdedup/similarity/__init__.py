"""What makes two texts alike: weighted words or character shingles (``words.py``) → 64-bit SimHash
(``simhash.py``); the MinHash sketch, its band keys and overlap estimates (``sketch.py``); passage keys
(``passages.py``); the near rule every store applies (``rule.py``); and the step that computes all of it
for one document (``fingerprinter.py``)."""
