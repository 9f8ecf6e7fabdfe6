"""How a verdict is said to a person (a drop line, a search result, the report): what decided it.

A near repeat is decided on the estimated overlap of the two texts (similarity/rule.py), not on the
SimHash distance, so that is what is said: ``similar 0.93`` (the estimated shingle Jaccard), or
``contained: 97 % of it inside, similarity 0.57`` for a text mostly inside the earlier one.
"""

from __future__ import annotations

from typing import Any


def decided(reason: str | None, similarity: float | None, contained: float | None = None) -> str:
    """What made a near repeat, from its verdict's ``reason``, ``similarity`` and ``contained`` (a
    document stored before verdicts named a reason says its similarity only)."""
    said = "similarity ?" if similarity is None else f"similarity {similarity:.2f}"
    if reason == "contained" and contained is not None:
        return f"contained: {contained:.0%} of it inside, {said}"
    return f"similar, {said}" if reason == "similar" else said


def drop_reason(doc_id: Any, verdict: Any) -> str:
    """The one line a dropped duplicate is logged with: ``<id>: near duplicate of <id> (similar, similarity 0.93)``."""
    why = "" if verdict.status == "exact" else f" ({decided(verdict.reason, verdict.similarity, verdict.contained)})"
    return f"{doc_id}: {verdict.status} duplicate of {verdict.dup_of}{why}"
