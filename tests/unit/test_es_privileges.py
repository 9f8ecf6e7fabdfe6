"""The privilege check at start (es_plugin/privileges.py) covers the index and its key registry."""

from __future__ import annotations

import pytest

from es_plugin.errors import MissingPrivilegeError
from es_plugin.privileges import CRAWL, Access


def check(answer: dict[str, object]) -> None:
    """Run the check's steps; the index exists (so create_index is not needed)."""
    steps = Access("news", CRAWL).check(answer)
    try:
        next(steps)  # the one request: does the index exist?
        steps.send(True)
    except StopIteration:
        return


def answer(registry: bool) -> dict[str, object]:
    held = {"read": True, "write": True, "view_index_metadata": True, "create_index": False}
    return {"username": "crawler", "cluster": {"manage_index_templates": False},
            "index": {"news": held, "news-keys": held if registry else {p: False for p in held}}}


def test_the_check_asks_about_the_index_and_its_registry() -> None:
    assert Access("news", CRAWL).request()["index"][0]["names"] == ["news", "news-keys"]


def test_a_role_without_the_registry_is_refused_naming_it() -> None:
    with pytest.raises(MissingPrivilegeError, match="'read', 'view_index_metadata' and 'write' on 'news-keys'"):
        check(answer(registry=False))


def test_a_role_with_both_passes() -> None:
    check(answer(registry=True))
