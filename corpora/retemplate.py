"""Re-templating: an article republished as a page of another Chinese portal, then extracted.

A repost rarely arrives as bare text: it is another site's page, with that site's header,
navigation, breadcrumb, sidebar, related-links box, share bar and footer, and often stock lines
inside the article container itself (a 【…讯】 dateline, a "关注我们的公众号" promotion, an
editor line), which no extractor can tell from the article. ``render`` builds such a page from
one of several portal templates with stock text; ``extract`` runs the engine's own cleaner on it,
so the benchmark sees what the engine sees. ``furniture_share`` measures how much of the
cleaned text is not from the article.
"""

from __future__ import annotations

import functools
import html
import random
from dataclasses import dataclass

from corpora.reposts import paragraphs
from scrapy_zhdedup.text.clean import TextCleaner


@dataclass(frozen=True)
class Portal:
    host: str
    name: str
    channels: tuple[str, ...]
    slogan: str
    promo: str  # a stock paragraph this site puts inside the article body
    dateline: str  # "" or a prefix like 【{name}讯】 put before the first paragraph
    editor_line: bool


PORTALS = (
    Portal("news.xinghe.cn", "星河新闻网", ("首页", "国内", "国际", "社会", "评论", "图片", "视频", "专题"),
           "权威资讯 第一时间", "关注星河新闻微信公众号，第一时间获取更多权威资讯。", "【星河新闻网讯】", True),
    Portal("finance.jinqiao.com", "金桥财经网", ("首页", "股票", "基金", "银行", "理财", "保险", "期货", "数据"),
           "专业财经 服务投资", "风险提示：本文内容仅供参考，不构成投资建议。市场有风险，投资需谨慎。", "", True),
    Portal("www.qingchuan.gov.cn", "青川地方网", ("首页", "时政", "民生", "文旅", "教育", "房产", "招聘"),
           "本地生活 尽在掌握", "", "", False),
    Portal("www.dongfangtoutiao.com", "东方头条", ("推荐", "热点", "社会", "娱乐", "科技", "汽车", "军事", "财经"),
           "看天下 知东方", "打开东方头条APP，阅读更多精彩内容，还能领取现金红包。", "", False),
    Portal("news.huaxia.net", "华夏资讯网", ("首页", "要闻", "时评", "法治", "教育", "健康", "文化"),
           "传播华夏声音", "（本文转自网络，如有侵权请联系删除）", "【华夏资讯】", True),
    Portal("www.nanfangzx.com", "南方在线", ("首页", "广东", "湾区", "观点", "体育", "生活", "视频"),
           "南方在线 在线南方", "", "南方在线讯　", True),
)

_HOT = (
    "国务院常务会议部署近期重点工作", "多地发布高温预警 注意防暑", "最新！全国油价迎来调整",
    "教育部发布重要通知", "这些新规下月起施行", "警惕！新型电信诈骗又出新招", "央行最新发声",
    "铁路部门推出便民新举措", "专家解读最新经济数据", "国产大飞机再传好消息", "医保目录调整结果公布",
    "今年第一场寒潮来了", "春运火车票开售时间确定", "全国多地楼市新政汇总",
)
_SURNAMES = "王李张刘陈杨黄赵吴周徐孙马朱胡郭何高林罗"
_GIVEN = "伟芳娜敏静丽强磊军洋勇艳杰娟涛明超秀霞平刚"


def _name(rng: random.Random) -> str:
    return rng.choice(_SURNAMES) + "".join(rng.choice(_GIVEN) for _ in range(rng.randint(1, 2)))


def render(portal: Portal, title: str, text: str, rng: random.Random) -> str:
    """``text`` (paragraphs split as ``corpora.reposts.paragraphs`` does) as a page of ``portal``."""
    paras = [p for p in paragraphs(text)[0] if p.strip()]
    if portal.dateline:
        paras[0] = portal.dateline + paras[0]
    if portal.promo:
        paras.append(portal.promo)
    if portal.editor_line:
        paras.append(f"（责任编辑：{_name(rng)}）")
    body = "\n".join(f"<p>{html.escape(p)}</p>" for p in paras)
    nav = "".join(f'<li><a href="/{i}/">{c}</a></li>' for i, c in enumerate(portal.channels))
    hot = "".join(f'<li><a href="/a/{rng.randint(10**6, 10**7)}.html">{h}</a></li>' for h in rng.sample(_HOT, 6))
    related = "".join(f'<li><a href="/r/{rng.randint(10**5, 10**6)}.html">{h}</a></li>' for h in rng.sample(_HOT, 4))
    when = f"2019-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d} {rng.randint(6, 23):02d}:{rng.randint(0, 59):02d}"
    return (
        f'<!DOCTYPE html><html lang="zh-CN"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}_{portal.name}</title>"
        f'<meta name="keywords" content="{portal.name},新闻,资讯"><style>.nav li{{display:inline}}</style>'
        f"<script>var _hmt=_hmt||[];(function(){{var hm=document.createElement('script');}})();</script></head>\n"
        f'<body><div class="topbar">{portal.name} | {portal.slogan} | 登录 | 注册 | 手机版 | 客户端下载</div>\n'
        f'<div class="header"><a href="/" class="logo">{portal.name}</a><form class="search">'
        f'<input name="q" placeholder="请输入关键词"><button>搜索</button></form></div>\n'
        f'<ul class="nav">{nav}</ul>\n'
        f'<div class="crumb">您的位置：<a href="/">首页</a> &gt; <a href="/1/">{portal.channels[1]}</a> &gt; 正文</div>\n'
        f'<div class="main"><div class="article"><h1>{html.escape(title)}</h1>\n'
        f'<div class="info">{when}　来源：{portal.name}　作者：{_name(rng)}　阅读：{rng.randint(100, 99999)}</div>\n'
        f'<div class="content">\n{body}\n</div>\n'
        '<div class="share">分享到：微信 朋友圈 微博 QQ空间</div>\n'
        f'<div class="related"><h3>相关阅读</h3><ul>{related}</ul></div></div>\n'
        f'<div class="sidebar"><h3>热点排行</h3><ol>{hot}</ol>'
        f'<div class="ad">广告</div></div></div>\n'
        f'<div class="footer"><p>关于我们 | 联系我们 | 广告服务 | 网站地图 | 法律声明 | 隐私保护</p>'
        f"<p>Copyright © 2003-2019 {portal.name} 版权所有 未经授权禁止转载</p>"
        f"<p>违法和不良信息举报电话：{rng.randint(100, 999)}-{rng.randint(10**7, 10**8 - 1)}</p></div>\n"
        "<script>document.write('<img src=/stat.gif>');</script></body></html>"
    )


@functools.lru_cache(maxsize=1)
def _cleaner() -> TextCleaner:
    return TextCleaner()


def extract(page: str) -> str:
    """The engine's main-text extraction and normalisation (``TextCleaner``, lxml)."""
    return _cleaner().clean(html=page)


def furniture_share(clean: str, article: str) -> float:
    """Share of the cleaned page's characters on lines that are not in the article (site furniture).

    A line counts as article text when it is a substring of the article after the same cleaning
    (whitespace removed); stock lines and datelines glued to a paragraph count as furniture.
    """
    body = "".join(_cleaner().clean(text=article).split())
    lines = ["".join(line.split()) for line in clean.split("\n")]
    total = sum(len(line) for line in lines)
    foreign = sum(len(line) for line in lines if line and line not in body)
    return foreign / total if total else 0.0
