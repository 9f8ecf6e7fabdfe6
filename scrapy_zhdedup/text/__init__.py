"""Text cleaning, before anything is hashed: bytes → decoded page → main text → normalised text (``clean.py``),
the lines that say who published a text rather than what it says (``furniture.py``), and what a document
must be to be judged at all (``validate.py``)."""
