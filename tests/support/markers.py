"""A directory's tests all carry its marker: `-m es` (how scripts/test.sh picks the tests it runs again on
Elasticsearch 8) and `-m "not fault"` select by marker, so a test placed by directory must be marked too."""

from __future__ import annotations

from pathlib import Path

import pytest


def require_marker(items: list[pytest.Item], directory: Path, marker: str) -> None:
    """Refuse the session if a test under ``directory`` lacks ``marker``."""
    unmarked = [item.nodeid for item in items
                if item.path.is_relative_to(directory) and item.get_closest_marker(marker) is None]
    if unmarked:
        raise pytest.UsageError(f"tests in {directory.name}/ without the {marker!r} marker: {', '.join(unmarked[:5])}")
