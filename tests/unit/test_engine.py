"""The verdict per document (unique / exact / near) on real Chinese news and their reposts."""

from __future__ import annotations

import pickle
from collections.abc import Callable

import pytest

from scrapy_zhdedup import DedupConfig, Deduper, EmptyTextError, Verdict
from scrapy_zhdedup.errors import InvalidDocumentError
from scrapy_zhdedup.judge import judge
from scrapy_zhdedup.model import Features
from scrapy_zhdedup.similarity.rule import NearRule, closest
from scrapy_zhdedup.similarity.simhash import hamming
from scrapy_zhdedup.similarity.sketch import Overlap
from tests.support import zhtexts
from tests.support.zhtexts import BOILERPLATE_FOOT, BOILERPLATE_HEAD, news_page

ARTICLES = zhtexts.articles(120)
SHORT = zhtexts.articles(40, min_chars=40, max_chars=150)


@pytest.fixture
def deduper() -> Deduper:
    return Deduper()


def _fp(deduper: Deduper, text: str) -> int:
    return deduper.fingerprinter.features(deduper.fingerprinter.clean(text=text)).fingerprint


def test_distinct_articles_are_unique(deduper: Deduper) -> None:
    for article in ARTICLES:
        v = deduper.judge(article.id, text=article.text)
        assert (v.status, v.dup_of, v.distance, v.cluster) == ("unique", None, None, article.id), article.id
        assert v.fingerprint is not None and not v.is_duplicate
    assert len(deduper.store) == len(ARTICLES)


def test_distinct_short_texts_are_unique(deduper: Deduper) -> None:
    assert {deduper.judge(a.id, text=a.text).status for a in SHORT} == {"unique"}


@pytest.mark.parametrize("variant", [
    pytest.param(lambda t: t, id="identical"),
    pytest.param(lambda t: "  " + t.replace("。", "。\n\n ") + "\n", id="layout"),
    pytest.param(zhtexts.full_width, id="full-width"),
    pytest.param(lambda t: zhtexts.full_width(t).replace("，", ",").replace("：", ":"), id="mixed-width"),
    pytest.param(lambda t: "\u200b" + t.replace("，", "，\u200b"), id="zero-width-spaces"),
])
def test_surface_changes_are_exact_repeats(deduper: Deduper, variant: Callable[[str], str]) -> None:
    for article in ARTICLES[:40]:
        deduper.judge(article.id, text=article.text)
    for i, article in enumerate(ARTICLES[:40]):
        v = deduper.judge(f"repost-{i}", text=variant(article.text))
        assert (v.status, v.dup_of, v.distance, v.cluster) == ("exact", article.id, 0, article.id)
        assert v.fingerprint is None  # answered by the content hash alone


def test_traditional_reposts_are_exact_when_the_conversion_round_trips(deduper: Deduper) -> None:
    for article in ARTICLES[:60]:
        deduper.judge(article.id, text=article.text)
    exact = 0
    for i, article in enumerate(ARTICLES[:60]):
        v = deduper.judge(f"trad-{i}", text=zhtexts.traditional(article.text))
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
    plain.judge(article.id, text=article.text)
    assert plain.judge("trad", text=zhtexts.traditional(article.text)).status != "exact"


def test_exact_repeats_are_found_without_fingerprinting(deduper: Deduper, monkeypatch: pytest.MonkeyPatch) -> None:
    article = ARTICLES[0]
    deduper.judge(article.id, text=article.text)

    def no_features(clean: str) -> Features:
        raise AssertionError("an exact repeat must not be fingerprinted")

    monkeypatch.setattr(deduper.fingerprinter, "features", no_features)
    v = deduper.judge("copy", html=news_page(article.title, article.text).replace(f"<h1>{article.title}</h1>", ""))
    assert (v.status, v.fingerprint) == ("exact", None)
    with pytest.raises(AssertionError, match="must not be fingerprinted"):
        deduper.judge("new", text=ARTICLES[1].text)


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
        original = deduper.judge(article.id, text=article.text)
        repost_text = edit(article.text, i)
        v = deduper.judge(f"{article.id}-{name}", text=repost_text)
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
        original = deduper.judge(article.id, text=article.text)
        text = zhtexts.edit_chars(article.text, 2, seed=100 + i)  # the sketch's SimHash moves more than words' did
        distance = hamming(_fp(deduper, text), original.fingerprint)
        v = deduper.judge(f"{article.id}-e", text=text)
        if distance <= deduper.config.threshold:
            assert v.status == "near" and v.distance <= distance
            checked += 1
    assert checked >= 30


def test_near_picks_the_most_similar_original(deduper: Deduper) -> None:
    text = ARTICLES[0].text
    far, original, query = zhtexts.edit_chars(text, 12, seed=1), text, zhtexts.edit_chars(text, 1, seed=2)
    for doc_id, version in (("far", far), ("original", original)):  # both originals: both are candidates
        prepared = deduper.fingerprinter.prepare(doc_id, text=version)
        deduper.store.add(doc_id, prepared.digest, deduper.fingerprinter.features(prepared.clean))
    v = deduper.judge("query", text=query)
    assert (v.status, v.dup_of, v.reason) == ("near", "original", "similar")


def test_cluster_ids_chain_to_the_first_document(deduper: Deduper) -> None:
    """Every duplicate carries the cluster of the document it repeats, so chains lead to the first."""
    cluster: dict[str, str] = {}
    chains = 0
    for i, article in enumerate(ARTICLES[:30]):
        edited = zhtexts.edit_chars(article.text, 2, seed=i)
        docs = [(f"{i}-first", article.text), (f"{i}-second", edited),
                (f"{i}-third", zhtexts.edit_chars(edited, 2, seed=1000 + i)), (f"{i}-copy", edited)]
        for doc_id, text in docs:
            v = deduper.judge(doc_id, text=text)
            cluster[doc_id] = v.cluster
            assert v.cluster == (doc_id if v.status == "unique" else cluster[v.dup_of])
        assert deduper.judge(f"{i}-copy", text=edited).dup_of == f"{i}-second"
        chains += cluster[f"{i}-third"] == f"{i}-first"
    assert chains >= 25


def test_same_template_different_articles_stay_unique(deduper: Deduper) -> None:
    """Different real articles inside one long boilerplate (site header, disclaimer, link lists)."""
    wrapped = [(a.id, f"{BOILERPLATE_HEAD}\n{a.text}\n{BOILERPLATE_FOOT}")
               for a in zhtexts.articles(120, min_chars=300, max_chars=600)]
    merged = [(doc_id, v.dup_of, v.distance) for doc_id, text in wrapped
              if (v := deduper.judge(doc_id, text=text)).status != "unique"]
    assert merged == []


def test_same_template_long_articles_stay_unique(deduper: Deduper) -> None:
    verdicts = [deduper.judge(a.id, text=f"{BOILERPLATE_HEAD}\n{a.text}\n{BOILERPLATE_FOOT}") for a in ARTICLES]
    assert {v.status for v in verdicts} == {"unique"}


def test_site_pages_of_distinct_articles_are_unique_and_their_copies_exact(deduper: Deduper) -> None:
    for site in ("xinwen", "caijing"):
        for a in ARTICLES[:40]:
            assert deduper.judge(f"{site}/{a.id}", html=news_page(a.title, a.text, site=site)).status == (
                "unique" if site == "xinwen" else "exact")


def test_one_article_as_html_in_two_templates_and_as_gbk_bytes(deduper: Deduper) -> None:
    article = zhtexts.articles(1, encodings=("gbk",))[0]
    a = deduper.judge("xinwen", html=news_page(article.title, article.text, site="xinwen"))
    gbk_page = news_page(article.title, article.text, site="caijing", charset="gbk").encode("gbk")
    b = deduper.judge("caijing", html=gbk_page)
    c = deduper.judge("text", text=f"{article.title}\n{article.text}")
    assert (a.status, b.status, b.dup_of, c.status, c.dup_of) == ("unique", "exact", "xinwen", "exact", "xinwen")


def test_short_texts_use_character_shingles(deduper: Deduper) -> None:
    found = 0
    for i, article in enumerate(SHORT):
        deduper.judge(article.id, text=article.text)
        assert deduper.judge(f"{article.id}-copy", text=zhtexts.full_width(article.text)).status == "exact"
        v = deduper.judge(f"{article.id}-typo", text=zhtexts.edit_chars(article.text, 1, seed=i))
        assert v.status == "unique" or v.dup_of == article.id
        found += v.status == "near"
    assert found >= 10


def test_judging_order_decides_which_copy_is_the_original(deduper: Deduper) -> None:
    a, b = ARTICLES[0], ARTICLES[1]
    assert deduper.judge("b", text=b.text).status == "unique"
    assert deduper.judge("a-repost", text=zhtexts.with_attribution(a.text)).status == "unique"
    v = deduper.judge("a", text=a.text)
    assert (v.status, v.dup_of) == ("near", "a-repost")


@pytest.mark.parametrize("kwargs", [
    {"text": ""}, {"text": "  \n "}, {"text": "，。！？"}, {"html": "<html><body><script>var a;</script></body></html>"},
    {"html": b""}, {},
], ids=["empty", "spaces", "punctuation", "markup-only", "no-bytes", "nothing"])
def test_nothing_to_judge_raises_and_remembers_nothing(deduper: Deduper, kwargs: dict) -> None:
    deduper.judge("before", text=ARTICLES[0].text)
    with pytest.raises(EmptyTextError):
        deduper.judge("empty", **kwargs)
    assert len(deduper.store) == 1


def test_nul_in_an_id_is_refused(deduper: Deduper) -> None:
    with pytest.raises(ValueError, match="NUL"):
        deduper.judge("a\x00b", text=ARTICLES[0].text)
    assert len(deduper.store) == 0


def test_verdict_record(deduper: Deduper) -> None:
    article = ARTICLES[0]
    first = deduper.judge("https://例子.cn/1", text=article.text)
    repeat = deduper.judge("https://例子.cn/2", text=article.text)
    assert first.record() == {"id": "https://例子.cn/1", "status": "unique", "dup_of": None, "reason": None,
                              "similarity": None, "contained": None, "distance": None}
    assert repeat.record() == {"id": "https://例子.cn/2", "status": "exact", "dup_of": "https://例子.cn/1",
                               "reason": "exact", "similarity": 1.0, "contained": 1.0, "distance": 0}
    assert repeat.is_duplicate and not first.is_duplicate


def test_the_threshold_only_widens_candidates_the_sketch_decides() -> None:
    """k = 0 leaves the SimHash bands nothing but identical fingerprints; the sketch keys still find a
    one-character edit, and the reported distance stays the real SimHash distance."""
    strict = Deduper(DedupConfig(threshold=0))
    found = []
    for i, article in enumerate(ARTICLES[:30]):
        original = strict.judge(article.id, text=article.text)
        v = strict.judge(f"{article.id}-typo", text=zhtexts.edit_chars(article.text, 1, seed=i))
        assert v.status == "near" and v.dup_of == article.id
        assert v.fingerprint is not None and original.fingerprint is not None
        assert v.distance == hamming(v.fingerprint, original.fingerprint)
        found.append(v.distance)
    assert max(found) > 0  # found beyond the bands' reach


def test_exact_repeats_are_never_fingerprinted(deduper: Deduper) -> None:
    deduper.judge("first", text=ARTICLES[0].text)
    prepared = deduper.fingerprinter.prepare("again", text=ARTICLES[0].text)
    verdict = deduper.judge_prepared(prepared)
    assert verdict.status == "exact" and verdict.fingerprint is None
    assert prepared.features is None  # never computed


def test_prepared_features_travel_through_pickle(deduper: Deduper) -> None:
    """What a worker process computes (issue 11) comes back usable, and is judged without a featurize."""
    prepared = deduper.fingerprinter.prepare("a", text=ARTICLES[1].text)
    features = prepared.featured(deduper.fingerprinter.features)
    copy = pickle.loads(pickle.dumps(prepared))
    assert copy.digest == prepared.digest and copy.features is not None
    assert (copy.features.fingerprint, copy.features.passages, copy.features.sketch_keys) == (
        features.fingerprint, features.passages, features.sketch_keys)
    assert copy.features.sketch.to_bytes() == features.sketch.to_bytes()
    fresh = Deduper()
    assert judge(copy, deduper.store) == fresh.judge_prepared(fresh.fingerprinter.prepare("a", text=ARTICLES[1].text))
    unprepared = pickle.loads(pickle.dumps(deduper.fingerprinter.prepare("b", text=ARTICLES[2].text)))
    with pytest.raises(RuntimeError, match="not computed"):
        judge(unprepared, deduper.store)


def test_the_near_rule_and_its_tie_break() -> None:
    rule = NearRule(similarity=0.68, containment=0.85, min_share=0.5, min_shingles=10)
    assert rule.reason(Overlap(0.7, 0.8, 500, 500)) == "similar"
    assert rule.reason(Overlap(0.4, 0.95, 500, 900)) == "contained"  # a cut copy of an earlier text
    assert rule.reason(Overlap(0.4, 0.95, 400, 900)) is None  # less than half of it: an excerpt is not a repost
    assert rule.reason(Overlap(0.3, 0.3, 900, 300)) is None  # the earlier text is inside this one: not a repeat
    assert rule.reason(Overlap(0.6, 0.8, 500, 500)) is None
    assert rule.reason(Overlap(0.9, 0.95, 7, 7)) is None  # a tiny text: one changed character is another fact
    assert rule.reason(Overlap(1.0, 1.0, 7, 7)) == "similar"  # the same words, other punctuation
    assert closest([(0.8, 1, "b"), (0.9, 9, "c"), (0.9, 2, "a")]) == "a"  # most similar, then oldest
    assert closest([]) is None


# --- which way a repeat goes (issue 31) -----------------------------------------------------------------

DISCLAIMER = ("特别声明：以上文章内容仅代表作者本人观点，不代表新浪看点观点或立场。"
              "如有关于作品内容、版权或其它问题请于作品发表后的30日内与新浪看点联系。")
STOCK_CLAUSE = "违反本法规定，构成违反治安管理行为的，由公安机关依法给予治安管理处罚；构成犯罪的，依法追究刑事责任。"


def _verdicts(*docs: tuple[str, str]) -> dict[str, Verdict]:
    deduper = Deduper()
    return {doc_id: deduper.judge(doc_id, text=text) for doc_id, text in docs}


def test_an_article_after_a_short_text_it_contains_is_not_its_repeat() -> None:
    article = ARTICLES[3].text[:400]
    v = _verdicts(("notice", DISCLAIMER), ("article", f"{article}\n{DISCLAIMER}"))
    assert v["article"].status == "unique"


def test_a_short_text_after_an_article_that_contains_it_is_not_its_repeat() -> None:
    """Less than half of the article: an excerpt or a stock notice, not a copy of the article."""
    article = ARTICLES[3].text[:400]
    v = _verdicts(("article", f"{article}\n{DISCLAIMER}"), ("notice", DISCLAIMER))
    assert v["notice"].status == "unique"


def test_a_cut_copy_is_a_repeat_contained_in_its_source() -> None:
    text = ARTICLES[4].text
    v = _verdicts(("full", text), ("cut", text[: len(text) * 6 // 10]))
    assert (v["cut"].status, v["cut"].dup_of, v["cut"].reason) == ("near", "full", "contained")
    assert v["cut"].contained is not None and v["cut"].contained >= 0.85
    assert v["cut"].similarity is not None and v["cut"].similarity < v["cut"].contained


def test_a_copy_with_a_new_headline_is_a_repeat() -> None:
    text = ARTICLES[5].text
    v = _verdicts(("original", text), ("repost", f"重磅！{ARTICLES[5].title}-网易号\n{text}"))
    assert (v["repost"].status, v["repost"].dup_of) == ("near", "original")


def test_a_stock_clause_inside_two_different_provisions_does_not_join_them() -> None:
    first = "国家建立健全大气污染防治的监督管理体制，县级以上人民政府生态环境主管部门对本行政区域的大气污染防治实施统一监督管理。"
    second = "任何单位和个人不得非法收集、使用、加工、传输他人个人信息，不得非法买卖、提供或者公开他人个人信息。"
    v = _verdicts(("clause", STOCK_CLAUSE), ("first", f"{first}{STOCK_CLAUSE}"), ("second", f"{second}{STOCK_CLAUSE}"))
    assert [v[k].status for k in ("clause", "first", "second")] == ["unique", "unique", "unique"]


def test_a_repeat_of_a_repeat_is_judged_against_the_original() -> None:
    """Only a cluster's original is a candidate: a chain of edits cannot drift a cluster away from it."""
    text = ARTICLES[6].text
    once = zhtexts.edit_chars(text, 6, seed=1)
    v = _verdicts(("original", text), ("once", once), ("twice", zhtexts.edit_chars(once, 6, seed=2)))
    assert (v["once"].status, v["once"].dup_of) == ("near", "original")
    assert v["twice"].dup_of in (None, "original")


def test_attribution_lines_do_not_decide() -> None:
    """Two different quotes with the same attribution stay apart; one quote with two attributions is one."""
    quote = "读书使人充实，讨论使人机智，笔记使人准确。读史使人明智，读诗使人灵秀，数学使人周密。"
    other = "人生最大的幸福，莫过于连续不断的劳动，让每一天都过得有意义，也让每一个明天都值得期待。"
    v = _verdicts(("a", f"{quote}\n——选自《培根随笔》"), ("b", f"{other}\n——选自《培根随笔》"),
                  ("c", f"{quote}\n来源：读者文摘"))
    assert v["b"].status == "unique"
    assert (v["c"].status, v["c"].dup_of, v["c"].similarity) == ("near", "a", 1.0)


# --- the same id again -------------------------------------------------------------------------------


def test_an_id_judged_again_with_the_same_content_gets_its_stored_verdict(deduper: Deduper) -> None:
    """A rerun or a resumed run must say what the first run said, never "exact, dup_of itself"."""
    a, b = ARTICLES[0], ARTICLES[1]
    first = [deduper.judge("a", text=a.text), deduper.judge("a-copy", text=a.text),
             deduper.judge("a-typo", text=zhtexts.edit_chars(a.text, 1, seed=1)), deduper.judge("b", text=b.text)]
    judged = deduper.store.judged
    again = [deduper.judge(v.doc_id, text=t) for v, t in zip(first, [
        a.text, a.text, zhtexts.edit_chars(a.text, 1, seed=1), b.text])]
    assert [v.record() for v in again] == [v.record() for v in first]
    assert [v.cluster for v in again] == [v.cluster for v in first]
    assert {v.rerun for v in again} == {"same"} and {v.rerun for v in first} == {None}
    assert deduper.store.judged == judged  # nothing remembered twice


def test_an_id_judged_again_with_other_content_is_a_new_version(deduper: Deduper) -> None:
    """Judged against everything except its own earlier versions, and remembered as the latest."""
    a, b = ARTICLES[0], ARTICLES[1]
    deduper.judge("a", text=a.text)
    deduper.judge("b", text=b.text)
    edited = deduper.judge("a", text=zhtexts.edit_chars(a.text, 2, seed=3))
    assert (edited.status, edited.dup_of, edited.rerun) == ("unique", None, "changed")
    moved = deduper.judge("b", text=a.text)  # b now carries a's first text: an exact repeat of a's old version
    assert (moved.status, moved.dup_of, moved.rerun) == ("exact", "a", "changed")
    assert deduper.judge("a", text=zhtexts.edit_chars(a.text, 2, seed=3)).rerun == "same"


def test_a_lone_surrogate_in_the_text_or_page_is_an_invalid_document(deduper: Deduper) -> None:
    """Refused before cleaning (OpenCC would fail on it), as a bad record, with nothing remembered."""
    for kwargs in ({"text": "正文 \udfff 更多中文内容"}, {"html": "<p>正文 \ud800 更多中文内容</p>"}):
        with pytest.raises(InvalidDocumentError, match="lone surrogate"):
            deduper.judge("x", **kwargs)
    assert deduper.store.judged == 0


def test_a_document_prepared_without_its_written_form_hashes_and_judges_the_same(deduper: Deduper) -> None:
    """``zhdedup scan`` stores no text, so it prepares without the text as written (left empty): the same
    normalised text, content hash and verdicts as a document prepared with it."""
    fingerprinter = deduper.fingerprinter
    for page in (news_page(a.title, a.text) for a in zhtexts.articles(3)):
        whole = fingerprinter.prepare("p", html=page)
        bare = fingerprinter.prepare_checked("p", html=page, written=False)
        assert (bare.clean, bare.digest, bare.written) == (whole.clean, whole.digest, "") and whole.written
    with pytest.raises(EmptyTextError):
        fingerprinter.prepare_checked("e", text="。，！", written=False)
