"""The verdict per document (unique / exact / near) on real Chinese news and their reposts."""

from __future__ import annotations

import pickle
from collections.abc import Callable

import pytest
import zhtexts
from zhtexts import BOILERPLATE_FOOT, BOILERPLATE_HEAD, news_page

from scrapy_zhdedup import DedupConfig, Deduper, EmptyTextError, Verdict
from scrapy_zhdedup.errors import InvalidDocumentError
from scrapy_zhdedup.fingerprint import hamming
from scrapy_zhdedup.judge import NearRule, closest, judge
from scrapy_zhdedup.sketch import Overlap

ARTICLES = zhtexts.articles(120)
SHORT = zhtexts.articles(40, min_chars=40, max_chars=150)


@pytest.fixture
def deduper() -> Deduper:
    return Deduper()


def _fp(deduper: Deduper, text: str) -> int:
    return deduper.fingerprinter.fingerprint(deduper.fingerprinter.clean(text=text))


def test_distinct_articles_are_unique(deduper: Deduper) -> None:
    for article in ARTICLES:
        v = deduper.check(article.id, text=article.text)
        assert (v.status, v.dup_of, v.distance, v.cluster) == ("unique", None, None, article.id), article.id
        assert v.fingerprint is not None and not v.is_duplicate
    assert len(deduper.store) == len(ARTICLES)


def test_distinct_short_texts_are_unique(deduper: Deduper) -> None:
    assert {deduper.check(a.id, text=a.text).status for a in SHORT} == {"unique"}


@pytest.mark.parametrize("variant", [
    pytest.param(lambda t: t, id="identical"),
    pytest.param(lambda t: "  " + t.replace("。", "。\n\n ") + "\n", id="layout"),
    pytest.param(zhtexts.full_width, id="full-width"),
    pytest.param(lambda t: zhtexts.full_width(t).replace("，", ",").replace("：", ":"), id="mixed-width"),
    pytest.param(lambda t: "\u200b" + t.replace("，", "，\u200b"), id="zero-width-spaces"),
])
def test_surface_changes_are_exact_repeats(deduper: Deduper, variant: Callable[[str], str]) -> None:
    for article in ARTICLES[:40]:
        deduper.check(article.id, text=article.text)
    for i, article in enumerate(ARTICLES[:40]):
        v = deduper.check(f"repost-{i}", text=variant(article.text))
        assert (v.status, v.dup_of, v.distance, v.cluster) == ("exact", article.id, 0, article.id)
        assert v.fingerprint is None  # answered by the content hash alone


def test_traditional_reposts_are_exact_when_the_conversion_round_trips(deduper: Deduper) -> None:
    for article in ARTICLES[:60]:
        deduper.check(article.id, text=article.text)
    exact = 0
    for i, article in enumerate(ARTICLES[:60]):
        v = deduper.check(f"trad-{i}", text=zhtexts.traditional(article.text))
        assert v.dup_of == article.id, article.id
        if zhtexts.round_trips_t2s(article.text):
            assert v.status == "exact", article.id
            exact += 1
        else:  # 著/着 and the like: a few characters may differ
            assert v.status in ("exact", "near")
    assert exact >= 40


def test_traditional_reposts_stay_apart_without_t2s() -> None:
    plain = Deduper(DedupConfig(traditional_to_simplified=False))
    article = ARTICLES[0]
    plain.check(article.id, text=article.text)
    assert plain.check("trad", text=zhtexts.traditional(article.text)).status != "exact"


def test_exact_repeats_are_found_without_fingerprinting(deduper: Deduper, monkeypatch: pytest.MonkeyPatch) -> None:
    article = ARTICLES[0]
    deduper.check(article.id, text=article.text)

    def no_fingerprint(clean: str) -> int:
        raise AssertionError("an exact repeat must not be fingerprinted")

    monkeypatch.setattr(deduper.fingerprinter, "fingerprint", no_fingerprint)
    v = deduper.check("copy", html=news_page(article.title, article.text).replace(f"<h1>{article.title}</h1>", ""))
    assert (v.status, v.fingerprint) == ("exact", None)
    with pytest.raises(AssertionError, match="must not be fingerprinted"):
        deduper.check("new", text=ARTICLES[1].text)


@pytest.mark.parametrize(("name", "edit", "min_rate"), [
    ("one-char", lambda t, i: zhtexts.edit_chars(t, 1, seed=i), 0.95),
    ("three-chars", lambda t, i: zhtexts.edit_chars(t, 3, seed=i), 0.9),
    ("attribution", lambda t, i: zhtexts.with_attribution(t), 0.9),
    ("attribution+typo+width",
     lambda t, i: zhtexts.full_width(zhtexts.with_attribution(zhtexts.edit_chars(t, 2, i))), 0.85),
])
def test_repost_edits_are_near_repeats_of_their_original(name: str, edit: Callable[[str, int], str],
                                                          min_rate: float) -> None:
    """Each repost comes right after its original among 60 other articles; distances are the real ones."""
    deduper = Deduper()
    k = deduper.config.threshold
    found = 0  # the similarity may come from containment (attribution: a copy inside a longer text)
    for i, article in enumerate(ARTICLES[:60]):
        original = deduper.check(article.id, text=article.text)
        repost_text = edit(article.text, i)
        v = deduper.check(f"{article.id}-{name}", text=repost_text)
        assert v.status != "exact", article.id
        assert v.fingerprint == _fp(deduper, repost_text)
        if v.status == "near":
            assert (v.dup_of, v.cluster) == (article.id, article.id), article.id
            assert v.distance == hamming(v.fingerprint, original.fingerprint)
            assert v.similarity is not None and v.similarity >= deduper.config.similarity
            found += 1
        else:  # missed: then it really is beyond k of everything the bands could offer
            assert hamming(v.fingerprint, original.fingerprint) > k, article.id
    assert found >= min_rate * 60, f"{name}: {found}/60 reposts found"


def test_near_verdicts_within_k_are_always_found(deduper: Deduper) -> None:
    """The band index misses nothing: every repost within k of its original is judged near."""
    checked = 0
    for i, article in enumerate(ARTICLES[:80]):
        original = deduper.check(article.id, text=article.text)
        text = zhtexts.edit_chars(article.text, 4, seed=100 + i)
        distance = hamming(_fp(deduper, text), original.fingerprint)
        v = deduper.check(f"{article.id}-e", text=text)
        if distance <= deduper.config.threshold:
            assert v.status == "near" and v.distance <= distance
            checked += 1
    assert checked >= 40


def test_near_picks_the_closest_earlier_document(deduper: Deduper) -> None:
    text = ARTICLES[0].text
    far, original, query = zhtexts.edit_chars(text, 6, seed=1), text, zhtexts.edit_chars(text, 1, seed=2)
    deduper.check("far", text=far)
    deduper.check("original", text=original)
    v = deduper.check("query", text=query)
    distances = {name: hamming(_fp(deduper, query), _fp(deduper, t))
                 for name, t in (("far", far), ("original", original))}
    assert v.status == "near"
    assert (v.distance, v.dup_of) == min((d, name) for name, d in distances.items())


def test_cluster_ids_chain_to_the_first_document(deduper: Deduper) -> None:
    """Every duplicate carries the cluster of the document it repeats, so chains lead to the first."""
    cluster: dict[str, str] = {}
    chains = 0
    for i, article in enumerate(ARTICLES[:30]):
        edited = zhtexts.edit_chars(article.text, 2, seed=i)
        docs = [(f"{i}-first", article.text), (f"{i}-second", edited),
                (f"{i}-third", zhtexts.edit_chars(edited, 2, seed=1000 + i)), (f"{i}-copy", edited)]
        for doc_id, text in docs:
            v = deduper.check(doc_id, text=text)
            cluster[doc_id] = v.cluster
            assert v.cluster == (doc_id if v.status == "unique" else cluster[v.dup_of])
        assert deduper.check(f"{i}-copy", text=edited).dup_of == f"{i}-second"
        chains += cluster[f"{i}-third"] == f"{i}-first"
    assert chains >= 25


def test_same_template_different_articles_stay_unique(deduper: Deduper) -> None:
    """Different real articles inside one long boilerplate (site header, disclaimer, link lists)."""
    wrapped = [(a.id, f"{BOILERPLATE_HEAD}\n{a.text}\n{BOILERPLATE_FOOT}")
               for a in zhtexts.articles(120, min_chars=300, max_chars=600)]
    merged = [(doc_id, v.dup_of, v.distance) for doc_id, text in wrapped
              if (v := deduper.check(doc_id, text=text)).status != "unique"]
    assert merged == []


def test_same_template_long_articles_stay_unique(deduper: Deduper) -> None:
    verdicts = [deduper.check(a.id, text=f"{BOILERPLATE_HEAD}\n{a.text}\n{BOILERPLATE_FOOT}") for a in ARTICLES]
    assert {v.status for v in verdicts} == {"unique"}


def test_site_pages_of_distinct_articles_are_unique_and_their_copies_exact(deduper: Deduper) -> None:
    for site in ("xinwen", "caijing"):
        for a in ARTICLES[:40]:
            assert deduper.check(f"{site}/{a.id}", html=news_page(a.title, a.text, site=site)).status == (
                "unique" if site == "xinwen" else "exact")


def test_one_article_as_html_in_two_templates_and_as_gbk_bytes(deduper: Deduper) -> None:
    article = zhtexts.articles(1, encodings=("gbk",))[0]
    a = deduper.check("xinwen", html=news_page(article.title, article.text, site="xinwen"))
    gbk_page = news_page(article.title, article.text, site="caijing", charset="gbk").encode("gbk")
    b = deduper.check("caijing", html=gbk_page)
    c = deduper.check("text", text=f"{article.title}\n{article.text}")
    assert (a.status, b.status, b.dup_of, c.status, c.dup_of) == ("unique", "exact", "xinwen", "exact", "xinwen")


def test_short_texts_use_character_shingles(deduper: Deduper) -> None:
    found = 0
    for i, article in enumerate(SHORT):
        deduper.check(article.id, text=article.text)
        assert deduper.check(f"{article.id}-copy", text=zhtexts.full_width(article.text)).status == "exact"
        v = deduper.check(f"{article.id}-typo", text=zhtexts.edit_chars(article.text, 1, seed=i))
        assert v.status == "unique" or v.dup_of == article.id
        found += v.status == "near"
    assert found >= 10


def test_judging_order_decides_which_copy_is_the_original(deduper: Deduper) -> None:
    a, b = ARTICLES[0], ARTICLES[1]
    assert deduper.check("b", text=b.text).status == "unique"
    assert deduper.check("a-repost", text=zhtexts.with_attribution(a.text)).status == "unique"
    v = deduper.check("a", text=a.text)
    assert (v.status, v.dup_of) == ("near", "a-repost")


@pytest.mark.parametrize("kwargs", [
    {"text": ""}, {"text": "  \n "}, {"text": "，。！？"}, {"html": "<html><body><script>var a;</script></body></html>"},
    {"html": b""}, {},
], ids=["empty", "spaces", "punctuation", "markup-only", "no-bytes", "nothing"])
def test_nothing_to_judge_raises_and_remembers_nothing(deduper: Deduper, kwargs: dict) -> None:
    deduper.check("before", text=ARTICLES[0].text)
    with pytest.raises(EmptyTextError):
        deduper.check("empty", **kwargs)
    assert len(deduper.store) == 1


def test_nul_in_an_id_is_refused(deduper: Deduper) -> None:
    with pytest.raises(ValueError, match="NUL"):
        deduper.check("a\x00b", text=ARTICLES[0].text)
    assert len(deduper.store) == 0


def test_verdict_record_and_dict(deduper: Deduper) -> None:
    article = ARTICLES[0]
    first = deduper.check("https://例子.cn/1", text=article.text)
    repeat = deduper.check("https://例子.cn/2", text=article.text)
    assert first.record() == {"id": "https://例子.cn/1", "status": "unique", "dup_of": None, "distance": None,
                              "similarity": None}
    assert repeat.record() == {"id": "https://例子.cn/2", "status": "exact", "dup_of": "https://例子.cn/1", "distance": 0,
                               "similarity": 1.0}
    data = repeat.as_dict()
    assert Verdict(**data) == repeat and data["content_hash"] == first.content_hash
    assert repeat.is_duplicate and not first.is_duplicate


def test_the_threshold_only_widens_candidates_the_sketch_decides() -> None:
    """k = 0 leaves the SimHash bands nothing but identical fingerprints; the sketch keys still find a
    one-character edit, and the reported distance stays the real SimHash distance."""
    strict = Deduper(DedupConfig(threshold=0))
    found = []
    for i, article in enumerate(ARTICLES[:30]):
        original = strict.check(article.id, text=article.text)
        v = strict.check(f"{article.id}-typo", text=zhtexts.edit_chars(article.text, 1, seed=i))
        assert v.status == "near" and v.dup_of == article.id
        assert v.fingerprint is not None and original.fingerprint is not None
        assert v.distance == hamming(v.fingerprint, original.fingerprint)
        found.append(v.distance)
    assert max(found) > 0  # found beyond the bands' reach


def test_exact_repeats_are_never_fingerprinted(deduper: Deduper) -> None:
    deduper.check("first", text=ARTICLES[0].text)
    prepared = deduper.fingerprinter.prepare("again", text=ARTICLES[0].text)
    verdict = judge(prepared, deduper.store)
    assert verdict.status == "exact" and verdict.fingerprint is None
    assert "features" not in vars(prepared)  # the cached property was never computed


def test_prepared_features_travel_through_pickle_without_the_fingerprinter(deduper: Deduper) -> None:
    """What a worker process computes (issue 11) comes back usable; its caches stay behind."""
    prepared = deduper.fingerprinter.prepare("a", text=ARTICLES[1].text)
    features = prepared.features
    copy = pickle.loads(pickle.dumps(prepared))
    assert copy.fingerprinter is None and copy.digest == prepared.digest
    assert (copy.fingerprint, copy.passages, copy.features.sketch_keys) == (
        features.fingerprint, features.passages, features.sketch_keys)
    assert copy.features.sketch.to_bytes() == features.sketch.to_bytes()
    assert judge(copy, deduper.store) == judge(deduper.fingerprinter.prepare("a", text=ARTICLES[1].text),
                                                 Deduper().store)
    unprepared = pickle.loads(pickle.dumps(deduper.fingerprinter.prepare("b", text=ARTICLES[2].text)))
    with pytest.raises(RuntimeError, match="not computed"):
        _ = unprepared.fingerprint


def test_the_near_rule_and_its_tie_break() -> None:
    rule = NearRule(similarity=0.65, containment=0.85, min_contained=10)
    assert rule.score(Overlap(0.7, 0.8, 500)) == 0.7
    assert rule.score(Overlap(0.3, 0.9, 500)) == 0.9  # mostly inside the other: a new headline, a cut tail
    assert rule.score(Overlap(0.3, 0.9, 5)) is None  # too short for containment alone
    assert rule.score(Overlap(0.6, 0.8, 500)) is None
    assert closest([(0.8, 1, "b"), (0.9, 9, "c"), (0.9, 2, "a")]) == "a"  # most similar, then oldest
    assert closest([]) is None


# --- the same id again -------------------------------------------------------------------------------


def test_an_id_judged_again_with_the_same_content_gets_its_stored_verdict(deduper: Deduper) -> None:
    """A rerun or a resumed run must say what the first run said, never "exact, dup_of itself"."""
    a, b = ARTICLES[0], ARTICLES[1]
    first = [deduper.check("a", text=a.text), deduper.check("a-copy", text=a.text),
             deduper.check("a-typo", text=zhtexts.edit_chars(a.text, 1, seed=1)), deduper.check("b", text=b.text)]
    judged = deduper.store.judged
    again = [deduper.check(v.doc_id, text=t) for v, t in zip(first, [
        a.text, a.text, zhtexts.edit_chars(a.text, 1, seed=1), b.text])]
    assert [v.record() for v in again] == [v.record() for v in first]
    assert [v.cluster for v in again] == [v.cluster for v in first]
    assert {v.rerun for v in again} == {"same"} and {v.rerun for v in first} == {None}
    assert deduper.store.judged == judged  # nothing remembered twice


def test_an_id_judged_again_with_other_content_is_a_new_version(deduper: Deduper) -> None:
    """Judged against everything except its own earlier versions, and remembered as the latest."""
    a, b = ARTICLES[0], ARTICLES[1]
    deduper.check("a", text=a.text)
    deduper.check("b", text=b.text)
    edited = deduper.check("a", text=zhtexts.edit_chars(a.text, 2, seed=3))
    assert (edited.status, edited.dup_of, edited.rerun) == ("unique", None, "changed")
    moved = deduper.check("b", text=a.text)  # b now carries a's first text: an exact repeat of a's old version
    assert (moved.status, moved.dup_of, moved.rerun) == ("exact", "a", "changed")
    assert deduper.check("a", text=zhtexts.edit_chars(a.text, 2, seed=3)).rerun == "same"


def test_a_lone_surrogate_in_the_text_or_page_is_an_invalid_document(deduper: Deduper) -> None:
    """Refused before cleaning (OpenCC would fail on it), as a bad record, with nothing remembered."""
    for kwargs in ({"text": "正文 \udfff 更多中文内容"}, {"html": "<p>正文 \ud800 更多中文内容</p>"}):
        with pytest.raises(InvalidDocumentError, match="lone surrogate"):
            deduper.check("x", **kwargs)
    assert deduper.store.judged == 0
