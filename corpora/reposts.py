"""Simulated 转载 (repost) edits of Chinese news text, for building ground truth.

Every transform is a pure function ``(text, rng) -> str``: the output depends only on
the text and the state of the ``random.Random`` passed in, so a seeded benchmark is
reproducible byte for byte.  Each transform always changes its input (a benchmark
record that silently equals its original would be mislabelled), and raises
``ValueError`` when the text is too small for the edit to make sense.

The edits mimic what Chinese sites actually do when they copy an article: wrap it in
their own 来源/编辑/免责声明 lines, convert punctuation width, introduce typos, drop or
reorder a paragraph, cut the tail off, or republish it in traditional characters.
``template_lookalike`` builds the opposite case: two *different* articles inside the
same long boilerplate, which a deduplicator must keep apart.
"""

from __future__ import annotations

import functools
import random
import re
import string
from collections.abc import Callable

import opencc

Transform = Callable[[str, random.Random], str]

# --- splitting -------------------------------------------------------------------

_SENTENCE = re.compile(r"[^。！？]*(?:[。！？]+[”’」』）)]*|$)")
_CLAUSE = re.compile(r"[^，；。！？,;!?\s]*(?:[，；。！？,;!?\s]+[”’」』）)]*|$)")
_CJK = re.compile(r"[\u4e00-\u9fff]")
_SENTENCE_END = re.compile(r"[。！？]")


def sentences(text: str) -> list[str]:
    """Split on 。！？ (keeping closing quotes with their sentence); joins back to ``text``."""
    return [s for s in _SENTENCE.findall(text) if s]


def clauses(text: str) -> list[str]:
    """Split after ，；。！？, their ASCII forms or whitespace (finer than sentences)."""
    return [s for s in _CLAUSE.findall(text) if s]


def paragraphs(text: str) -> tuple[list[str], str]:
    """Split ``text`` into paragraph-like chunks and return them with the joiner.

    Real newlines win when there are at least three of them.  Otherwise the sentences
    — or, for very short text, the clauses; for text without any punctuation, three
    even pieces — are grouped into 3–6 chunks of similar length, so dropping or
    swapping one chunk changes a realistic share of the article.
    ``joiner.join(chunks)`` reproduces ``text`` up to surrounding whitespace.
    """
    lines = [line.strip() for line in text.split("\n") if line.strip()]
    if len(lines) >= 3:
        return lines, "\n"
    units = sentences(text)
    if len(units) < 3:
        units = clauses(text)
    if len(units) < 2:  # no punctuation at all (e.g. a run of headlines): even pieces
        size = -(-len(text) // 3)
        units = [text[i : i + size] for i in range(0, len(text), size)]
    k = min(len(units), max(3, min(6, len(text) // 150)))
    if k < 2:
        return [text], ""
    total = sum(len(u) for u in units)
    chunks: list[list[str]] = [[] for _ in range(k)]
    done = 0
    for unit in units:  # a unit goes to the chunk holding its midpoint
        chunks[min(k - 1, (2 * done + len(unit)) * k // (2 * total))].append(unit)
        done += len(unit)
    joined = ["".join(c) for c in chunks if c]
    return (joined if len(joined) >= 2 else units), ""


# --- boilerplate vocabulary -------------------------------------------------------------

_SITES = (
    "新浪新闻", "搜狐网", "网易新闻", "凤凰网", "腾讯新闻", "中国新闻网", "环球网", "澎湃新闻",
    "东方网", "北青网", "大河网", "红网", "金羊网", "东北网", "华龙网", "中华网", "央广网",
    "光明网", "齐鲁网", "荆楚网", "南方网", "新民网", "扬子晚报网", "潇湘晨报",
)
_SURNAMES = "王李张刘陈杨黄赵吴周徐孙马朱胡郭何高林罗郑梁谢宋唐许韩冯邓曹彭曾萧田董袁潘"
_GIVEN = "伟芳娜敏静丽强磊军洋勇艳杰娟涛明超秀霞平刚桂英华玉萍红玲芬燕彬晨宇欣然浩博文"
_ACCOUNTS = ("今日头条号", "财经早知道", "身边事", "城市生活圈", "看点快报", "热点观察", "新闻夜航")
_WEIBO_USERS = ("新闻早知道", "财经观察君", "本地生活通", "吃瓜前线", "热搜速递", "城事播报", "头条君")
_TAGS = ("今日热点", "社会新闻", "身边事", "财经资讯", "本地头条", "热门话题")


def _name(rng: random.Random) -> str:
    return rng.choice(_SURNAMES) + "".join(rng.choice(_GIVEN) for _ in range(rng.randint(1, 2)))


def _date(rng: random.Random, year: int = 2019) -> str:
    return f"{year}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"


def _clock(rng: random.Random) -> str:
    return f"{rng.randint(6, 23):02d}:{rng.randint(0, 59):02d}"


def _header_lines(text: str, rng: random.Random) -> list[str]:
    site = rng.choice(_SITES)
    first = clauses(text)[0].rstrip("，；。！？")[:30]
    options = [
        f"{_date(rng)} {_clock(rng)}  来源：{site}",
        f"来源：{site}  作者：{_name(rng)}  编辑：{_name(rng)}",
        f"本文转载自微信公众号“{rng.choice(_ACCOUNTS)}”",
        f"原标题：{first}",
        f"发布时间：{_date(rng)} {_clock(rng)}:{rng.randint(0, 59):02d}  浏览次数：{rng.randint(100, 99999)}",
        "字号：大 中 小  打印本页  关闭窗口",
    ]
    return rng.sample(options, rng.randint(1, 2))


def _footer_lines(rng: random.Random) -> list[str]:
    site = rng.choice(_SITES)
    options = [
        f"责任编辑：{_name(rng)}",
        f"（编辑：{_name(rng)}  审核：{_name(rng)}）",
        f"免责声明：本文转载自{site}，目的在于传递更多信息，并不代表本网赞同其观点和对其真实性负责。如有侵权，请联系删除。",
        f"版权声明：凡注明“来源：{site}”的作品，版权均属{site}所有，未经授权不得转载。",
        "分享到：微信 朋友圈 新浪微博 QQ空间",
        "喜欢这篇文章？欢迎点赞、转发，分享给更多朋友！",
        f"更多精彩内容，请关注{site}官方微信公众号。",
        f"【纠错】 【责任编辑：{_name(rng)}】",
    ]
    return rng.sample(options, rng.randint(1, 3))


# --- transforms -------------------------------------------------------------------


def add_header_footer(text: str, rng: random.Random) -> str:
    """Wrap the text in another site's 来源/编辑 header and 免责声明/分享 footer lines.

    Short (microblog-sized, < 200 chars) text gets a weibo-style repost wrapper
    instead, since a three-line header would be longer than the post itself.
    """
    if len(text) < 200:
        user = rng.choice(_WEIBO_USERS)
        prefix = rng.choice([f"//@{user}: 转发微博 ", "转：", f"#{rng.choice(_TAGS)}# ", ""])
        suffix = rng.choice([f"（来源：{rng.choice(_SITES)}）", " 网页链接", f" @{user}", ""])
        if not prefix and not suffix:
            suffix = " 网页链接"
        return prefix + text + suffix
    return "\n".join([*_header_lines(text, rng), text, *_footer_lines(rng)])


_ASCII_ALNUM_CHARS = string.digits + string.ascii_letters
_WIDEN = {c: chr(ord(c) + 0xFEE0) for c in _ASCII_ALNUM_CHARS} | {
    ",": "，", ":": "：", ";": "；", "!": "！", "?": "？", "(": "（", ")": "）",
}
_NARROW = {chr(ord(c) + 0xFEE0): c for c in _ASCII_ALNUM_CHARS} | {
    "，": ",", "。": ".", "：": ":", "；": ";", "！": "!", "？": "?", "（": "(", "）": ")",
    "“": '"', "”": '"', "‘": "'", "’": "'", "、": ",", "【": "[", "】": "]",
}
_ASCII_ALNUM = re.compile(r"[0-9A-Za-z]")
_CJK_ASCII_BOUNDARY = re.compile(r"(?<=[\u4e00-\u9fff])(?=[0-9A-Za-z])|(?<=[0-9A-Za-z])(?=[\u4e00-\u9fff])")


def punct_width(text: str, rng: random.Random) -> str:
    """Flip full-width ↔ half-width punctuation, digits and letters, and insert spaces.

    One direction is chosen per document (sites normalise whole pages, not single
    characters); a random 50–100 % share of the candidates is converted, and spaces
    may be put between CJK and Latin/digits (the "pangu" style many CMSs apply).
    """
    share = rng.uniform(0.5, 1.0)
    table = _WIDEN if _ASCII_ALNUM.search(text) and rng.random() < 0.5 else _NARROW
    out = "".join(table[ch] if ch in table and rng.random() < share else ch for ch in text)
    if rng.random() < 0.5 or out == text:
        out = _CJK_ASCII_BOUNDARY.sub(" ", out)
    if out == text:  # nothing to convert: fall back to stray spaces after punctuation
        out = re.sub(r"(?<=[，。])", " ", text)
    if out == text:
        raise ValueError("punct_width: text has no punctuation, digits or letters to change")
    return out


# Common confusions in real typos (homophones and look-alike characters).
_CONFUSABLE = {
    "的": "地得", "地": "的得", "得": "的地", "在": "再", "再": "在", "做": "作", "作": "做",
    "已": "以己", "以": "已", "即": "既", "既": "即", "账": "帐", "象": "像", "像": "象",
    "订": "定", "定": "订", "须": "需", "需": "须", "起": "启", "界": "届", "候": "侯",
    "辩": "辨", "辨": "辩", "历": "厉", "检": "捡", "带": "戴", "部": "布", "按": "安",
}
# Frequent characters of Chinese news text, used for random substitutions and insertions.
_COMMON = (
    "的一人是在了不有中大为年上行时和发到个生公这国以市要法来家业工我出车作对后会地日事区用"
    "多成就理方能现他民下自全经动月过安们开于进子通实新分机定可被学小也部等关电高员者天其前"
    "司建面产道务合都网心长场同说交主还力当所重好本信资路提点元警金得案院管体保化起之处报内"
    "情与没查将而品并目看设明里水最名县如及展加文间三着因位任手政度次意应第平期无南入万从制"
)


def edit_chars(text: str, rng: random.Random) -> str:
    """Replace, insert or delete 1–3 % of the characters (at least one edit).

    Edits land on CJK characters; replacements prefer a confusable homophone or
    look-alike, else a frequent character, mimicking OCR/typing/editing noise.
    """
    positions = [m.start() for m in _CJK.finditer(text)]
    if not positions:
        raise ValueError("edit_chars: text has no CJK characters")
    count = min(len(positions), max(1, round(len(text) * rng.uniform(0.01, 0.03))))
    edits = {pos: rng.choice("rrrid") for pos in rng.sample(positions, count)}
    out: list[str] = []
    for i, ch in enumerate(text):
        op = edits.get(i)
        if op is None:
            out.append(ch)
        elif op == "r":
            pool = _CONFUSABLE.get(ch) or _COMMON.replace(ch, "")
            out.append(rng.choice(pool))
        elif op == "i":
            out.append(rng.choice(_COMMON) + ch)
        # op == "d": drop the character
    return "".join(out)


def drop_paragraph(text: str, rng: random.Random) -> str:
    """Remove one paragraph (chunk) that is at most 40 % of the text."""
    paras, joiner = paragraphs(text)
    if len(paras) < 2:
        raise ValueError("drop_paragraph: text has fewer than two paragraphs or clauses")
    total = sum(len(p) for p in paras)
    small = [i for i, p in enumerate(paras) if len(p) <= 0.4 * total]
    victim = rng.choice(small) if small else min(range(len(paras)), key=lambda i: len(paras[i]))
    return joiner.join(p for i, p in enumerate(paras) if i != victim)


def swap_paragraphs(text: str, rng: random.Random) -> str:
    """Exchange two different paragraphs (chunks)."""
    paras, joiner = paragraphs(text)
    pairs = [(i, j) for i in range(len(paras)) for j in range(i + 1, len(paras)) if paras[i] != paras[j]]
    if not pairs:
        raise ValueError("swap_paragraphs: text has no two distinct paragraphs or clauses")
    i, j = rng.choice(pairs)
    paras[i], paras[j] = paras[j], paras[i]
    return joiner.join(paras)


def truncate(text: str, rng: random.Random) -> str:
    """Keep the first 70–90 % of the text, cut at a sentence end when one is in range."""
    if len(text) < 10:
        raise ValueError("truncate: text shorter than 10 characters")
    target = round(len(text) * rng.uniform(0.7, 0.9))
    lo = round(len(text) * 0.7)
    ends = [m.end() for m in _SENTENCE_END.finditer(text, lo) if m.end() <= target]
    return text[: ends[-1] if ends else target].rstrip()


@functools.lru_cache(maxsize=1)
def _s2t() -> opencc.OpenCC:
    return opencc.OpenCC("s2t")


def traditional(text: str, rng: random.Random) -> str:
    """Convert simplified to traditional characters (OpenCC ``s2t``); ``rng`` is unused."""
    out = _s2t().convert(text)
    if out == text:
        raise ValueError("traditional: text has no simplified characters to convert")
    return out


# Order in which combo applies its steps: structural edits first, site wrapping last.
_COMBO_ORDER = (
    "drop_paragraph", "swap_paragraphs", "truncate", "edit_chars", "traditional",
    "punct_width", "add_header_footer",
)


def apply_combo(text: str, rng: random.Random) -> tuple[str, list[str]]:
    """Apply 2–3 distinct single transforms; return the text and the step names."""
    steps = sorted(rng.sample(_COMBO_ORDER, rng.randint(2, 3)), key=_COMBO_ORDER.index)
    for step in steps:
        text = TRANSFORMS[step](text, rng)
    return text, steps


def combo(text: str, rng: random.Random) -> str:
    """2–3 of the single transforms chained, as a repost passing through several sites."""
    return apply_combo(text, rng)[0]


TRANSFORMS: dict[str, Transform] = {
    "add_header_footer": add_header_footer,
    "punct_width": punct_width,
    "edit_chars": edit_chars,
    "drop_paragraph": drop_paragraph,
    "swap_paragraphs": swap_paragraphs,
    "truncate": truncate,
    "traditional": traditional,
    "combo": combo,
}


def repost(text: str, name: str, rng: random.Random) -> tuple[str, str]:
    """Apply the transform called ``name``; return the text and its detail (combo steps)."""
    if name == "combo":
        out, steps = apply_combo(text, rng)
        return out, "+".join(steps)
    if name not in TRANSFORMS:
        raise KeyError(f"unknown transform {name!r}; known: {', '.join(TRANSFORMS)}")
    return TRANSFORMS[name](text, rng), ""


# --- look-alikes: same boilerplate, different facts -------------------------------------

_CHANNELS = ("国内新闻", "社会新闻", "财经频道", "本地资讯", "民生热点")
_RELATED = (
    "多地出台新政策 市民生活将迎来这些变化", "暑期出行高峰来临 交通部门发布安全提示",
    "夏季高温持续 专家提醒注意防暑降温", "楼市调控持续加码 业内人士解读后市走向",
    "消费者权益保护新规实施 这些情况可以退款", "一季度经济数据出炉 多项指标稳中向好",
    "教育部门发布通知 中小学开学时间确定", "警方提醒：警惕新型网络诈骗手法",
    "社区服务中心正式启用 居民办事更方便", "地铁新线路开通在即 沿线站点一览",
    "食品安全抽检结果公布 这些产品不合格", "医保报销政策调整 患者负担进一步减轻",
)
_NAV = "首页 | 新闻 | 国内 | 国际 | 财经 | 体育 | 娱乐 | 科技 | 汽车 | 房产 | 教育 | 健康 | 旅游 | 图片 | 视频"
_PROVINCES = "京沪粤浙苏鲁川湘鄂豫皖闽"


def _excerpt(text: str, max_chars: int) -> str:
    """Leading whole sentences up to ``max_chars`` (at least one sentence)."""
    out = ""
    for sentence in sentences(text):
        if len(out) + len(sentence) > max_chars:
            break
        out += sentence
    return out or text[:max_chars]


def _site_boilerplate(rng: random.Random) -> tuple[list[str], list[str]]:
    site = rng.choice(_SITES)
    related = rng.sample(_RELATED, 8)
    head = [f"{site}{_NAV}", f"当前位置：首页 > {rng.choice(_CHANNELS)} > 正文"]
    foot = [
        "相关阅读：", *related[:5], "热门推荐：", *related[5:],
        "关于我们 | 联系我们 | 广告服务 | 网站地图 | 招聘信息 | 法律声明 | 隐私保护",
        f"Copyright © 2005-2019 {site} 版权所有  {rng.choice(_PROVINCES)}ICP备{rng.randint(10**7, 10**8 - 1)}号",
        f"违法和不良信息举报电话：{rng.randint(100, 999)}-{rng.randint(10**7, 10**8 - 1)}  本网站所刊载信息，不代表本站观点。",
    ]
    return head, foot


_PLACES = ("浙江", "江苏", "广东", "上海", "北京", "深圳", "四川", "湖南", "安徽", "山东", "福建", "湖北")
_CORES = ("华宇", "天成", "金达", "恒信", "海诚", "瑞丰", "中科", "博远", "新晨", "长青", "鼎盛", "合力", "永安", "润德")
_TRADES = ("科技", "电子", "医药", "化工", "新材料", "环境", "电气", "智能装备", "食品", "建设")
_TOPICS = (
    ("使用闲置自有资金进行现金管理的进展", "现金管理"),
    ("控股股东部分股份质押", "股份质押"),
    ("对外投资设立全资子公司", "对外投资"),
    ("获得政府补助", "政府补助"),
    ("签订日常经营重大合同", "重大合同"),
)
_RESPONSIBILITY = (
    "本公司董事会及全体董事保证本公告内容不存在任何虚假记载、误导性陈述或者重大遗漏，"
    "并对其内容的真实性、准确性和完整性承担个别及连带责任。"
)


def _announcement(body: str, topic: tuple[str, str], rng: random.Random) -> str:
    company = rng.choice(_PLACES) + rng.choice(_CORES) + rng.choice(_TRADES)
    short = company[2:6]
    month, day = rng.randint(1, 12), rng.randint(1, 28)
    title, item = topic
    return "\n".join([
        f"证券代码：{rng.choice(('60', '00', '30'))}{rng.randint(0, 9999):04d}　　证券简称：{short}"
        f"　　公告编号：2019-{rng.randint(1, 120):03d}",
        f"{company}股份有限公司",
        f"关于{title}的公告",
        _RESPONSIBILITY,
        "重要内容提示：",
        f"● 本次{item}涉及金额：人民币{rng.randint(500, 90000)}万元",
        f"● 本次事项已经公司第{rng.choice('三四五六七')}届董事会第{rng.randint(2, 30)}次会议审议通过，无需提交股东大会审议。",
        f"一、{item}概述",
        body,
        "二、对公司的影响",
        "本次事项不会对公司2019年度的财务状况和经营成果产生重大影响，不存在损害公司及全体股东特别是中小股东利益的情形。",
        "三、风险提示",
        "敬请广大投资者理性投资，注意投资风险。",
        "特此公告。",
        f"{company}股份有限公司董事会",
        f"2019年{month}月{day}日",
    ])


def template_lookalike(base_a: str, base_b: str, rng: random.Random) -> tuple[str, str]:
    """Two different articles in the same boilerplate: a pair that is NOT a duplicate.

    Either both bodies sit inside one site's long navigation/related-links/copyright
    frame (each with its own dateline), or both become a templated listed-company
    公告 with the same legal wording but different company, numbers, dates and body.
    """
    if base_a == base_b:
        raise ValueError("template_lookalike: the two base texts must differ")
    if rng.random() < 0.5:
        head, foot = _site_boilerplate(rng)
        a, b = (
            "\n".join([*head, f"{_date(rng)} {_clock(rng)}  来源：{rng.choice(_SITES)}  作者：{_name(rng)}",
                       _excerpt(body, 900), *foot])
            for body in (base_a, base_b)
        )
        return a, b
    topic = rng.choice(_TOPICS)
    return _announcement(_excerpt(base_a, 450), topic, rng), _announcement(_excerpt(base_b, 450), topic, rng)
