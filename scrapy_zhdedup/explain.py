"""How a verdict is said to a person (a drop line, a search result, the report): what decided it.

A near repeat is decided on the estimated overlap of the two texts (judge.NearRule), not on the
SimHash distance, so that is what is said: ``similarity 0.93``, and the rule that accepted it
(``reason``: e.g. ``contained``) where the verdict names one.
"""

from __future__ import annotations

from typing import Any


def reason_of(verdict: Any) -> str | None:
    """The rule that decided ``verdict`` (a Verdict, or anything with its fields), if it names one."""
    reason = getattr(verdict, "reason", None)
    return str(reason) if reason else None


def decided(similarity: float | None, reason: str | None = None) -> str:
    """``similarity 0.93``, then the deciding rule when there is one: ``similarity 0.91, contained``."""
    said = "similarity ?" if similarity is None else f"similarity {similarity:.2f}"
    return f"{said}, {reason}" if reason else said


def drop_reason(doc_id: Any, verdict: Any) -> str:
    """The one line a dropped duplicate is logged with: ``<id>: near duplicate of <id> (similarity 0.93)``."""
    why = "" if verdict.status == "exact" else f" ({decided(verdict.similarity, reason_of(verdict))})"
    return f"{doc_id}: {verdict.status} duplicate of {verdict.dup_of}{why}"
