"""Counting questions read out of a query: what is counted, how, of which kind, where
(:func:`count_question`; the counting itself is :mod:`pagesight.query.counting`).

English and Japanese; regular expressions only, no model. What is counted (``target``):
pages or slides, figures, charts, tables, images, equations; whether pages or items are
counted ("how many pages contain tables" counts pages); whether it is a list ("list the
tables", "which slides mention ..."); kind words ("bar charts": their captions and labels must
carry them); charts over years; topic terms ("related to Airbus", "that include 'F1'"); a scope
(a section, chapter, note, appendix, titled section or page range through
:func:`pagesight.query.references.parse_references`, "between pages 5 and 10", "the first 10
slides"). A query holding none of the cue keywords is rejected by a substring test before any
pattern runs (:func:`has_count_cue`): the route costs ~0 for it.

What is not a counting question: "how many employees ..." (no structure noun), "what tables
show revenue" (their content, not their number), "how many pages for the hatom type" (a page
count with topic words but no verb such as "mention": a number the document prints),
"図は何ページにありますか" (which page, not how many).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from pagesight.core.types import StructuralReference
from pagesight.models.text import tokenize
from pagesight.query.references import parse_references

#: Longest question read for a count (a longer text is not a counting question).
MAX_QUESTION_CHARS = 2000

Target = Literal["page", "figure", "chart", "table", "image", "equation"]

_NOUNS_EN: dict[str, Target] = {
    "page": "page", "slide": "page", "figure": "figure", "fig": "figure", "chart": "chart",
    "graph": "chart", "plot": "chart", "histogram": "chart", "diagram": "figure",
    "table": "table", "image": "image", "picture": "image", "photo": "image",
    "photograph": "image", "illustration": "image", "equation": "equation", "formula": "equation",
}  # fmt: skip
_NOUN_EN = (
    r"(?P<noun>pages?|slides?|figures?|figs?\.?|charts?|graphs?|plots?|histograms?|diagrams?"
    r"|tables?|images?|pictures?|photos?|photographs?|illustrations?|equations?"
    r"|formula(?:s|e)?)(?![\w-])"
)
#: Kinds of chart or figure a question may name before the noun ("bar charts").
_KIND_WORDS = (
    "bar", "column", "pie", "line", "scatter", "donut", "doughnut", "stacked", "area", "radar",
    "bubble", "flow", "venn", "tree", "network", "heat", "waterfall", "gantt", "map",
)  # fmt: skip
_KIND_EN = rf"(?P<kinds>(?:(?:{'|'.join(_KIND_WORDS)})[\s-]+){{1,2}})?"
_CUE_EN = re.compile(
    r"\b(?P<cue>how\s+many|(?:the\s+)?(?:total\s+)?number\s+of|count(?:\s+of)?|list(?:\s+all)?"
    r"|enumerate|(?:on\s+|in\s+)?(?:which|what))\s+"
    r"(?:(?:of\s+)?(?:the|all|any|distinct|different|separate|individual|unique|these|those)\s+)"
    rf"{{0,2}}{_KIND_EN}{_NOUN_EN}",
    re.IGNORECASE,
)
#: "pages that contain tables", "slides with bar charts": pages counted by what they show.
_PER_PAGE_EN = re.compile(
    r"\s*(?:that\s+|which\s+|do\s+|does\s+)?(?:contains?|containing|have|has|having|shows?|showing"
    r"|with|includes?|including|features?|featuring|displays?|displaying|presents?|carry|carries)"
    r"\s+(?:(?:a|an|any|at\s+least\s+one|one\s+or\s+more|some)\s+)?"
    rf"{_KIND_EN}{_NOUN_EN}",
    re.IGNORECASE,
)
#: Words after "pages"/"slides" that ask about the pages' text ("which slides mention Airbus").
_MENTION_EN = re.compile(
    r"\b(?:mentions?|mentioning|discuss(?:es)?|discussing|refer(?:s)?\s+to|talks?\s+about"
    r"|cover(?:s)?|about|related\s+to|regarding|concerning)\b",
    re.IGNORECASE,
)
_YEARS_CUE = re.compile(
    r"\b(?:over|across|through|by|per)\s+(?:the\s+)?(?:years?|time|decades?)\b|\btrends?\b"
    r"|\bannual(?:ly)?\b|\bover\s+\d{4}\s*(?:-|–|to)\s*\d{4}|推移|経年|年次|年度別|年別",
    re.IGNORECASE,
)
_BETWEEN_PAGES = re.compile(
    r"\b(?:between|from)\s+(?P<kind>pages?|slides?)\s+(?P<a>\d{1,4})\s*(?:and|to|-|–)\s*"
    r"(?:(?:pages?|slides?)\s+)?(?P<b>\d{1,4})\b",
    re.IGNORECASE,
)
_FIRST_LAST = re.compile(
    r"\b(?:the\s+)?(?P<end>first|last)\s+(?P<n>\d{1,4})\s+(?:pages?|slides?)\b"
    r"|(?P<end_ja>最初|最後|先頭|末尾)の\s*(?P<n_ja>\d{1,4})\s*(?:ページ|枚)",
    re.IGNORECASE,
)
_QUOTED = re.compile(r"[\"“”'‘’「『]([^\"“”'‘’」』]{1,60})[\"“”'‘’」』]")

_NOUNS_JA: dict[str, Target] = {
    "スライド": "page", "ページ": "page", "図表": "figure", "図": "figure", "グラフ": "chart",
    "チャート": "chart", "表": "table", "画像": "image", "写真": "image", "イラスト": "image",
    "数式": "equation",
}  # fmt: skip
_KINDS_JA = {"棒": "bar", "円": "pie", "折れ線": "line", "帯": "bar", "散布": "scatter"}
_NOUN_JA = r"(?P<noun>スライド|ページ|図表|図|グラフ|チャート|表|画像|写真|イラスト|数式)"
_KIND_JA = r"(?P<kinds>棒|円|折れ線|帯|散布)?"
#: A counter word, not "何ページに" / "何ページ目" (which page, not how many).
_COUNTER_JA = (
    r"(?:いくつ|幾つ|何個|何枚|何点|何件|何ページ|何つ|何種類)(?!に|目|で|の|から|まで|へ)"
)
_CUE_JA = [
    # 図はいくつ, スライドは全部で何枚, 表は何点
    re.compile(
        rf"{_KIND_JA}{_NOUN_JA}(?:は|が)(?:全部で|合計で|全体で|いくつ|全部|合わせて)?\s*"
        rf"{_COUNTER_JA}"
    ),
    # 何枚のスライド, 何個の図, いくつの表
    re.compile(rf"{_COUNTER_JA}の{_KIND_JA}{_NOUN_JA}"),
    # 表の数, 図の総数, スライドの枚数, ページ数
    re.compile(rf"{_KIND_JA}{_NOUN_JA}の?(?:総数|個数|枚数|件数|点数|数)(?!値|字|式)"),
]
_LIST_JA = re.compile(rf"{_KIND_JA}{_NOUN_JA}(?:を|の)(?:すべて|全て)?(?:一覧|列挙|挙げ|リスト)")
#: 表があるページ, グラフを含むスライド: pages counted by what they show.
_PER_PAGE_JA = re.compile(
    rf"{_KIND_JA}{_NOUN_JA}(?:が|を|の)(?:ある|含む|含まれる|載っている|掲載されている|入っている"
    r"|あるもの)(?P<unit>ページ|スライド)"
)
_WHICH_JA = re.compile(r"どの(?P<unit>ページ|スライド)")
_TOPIC_JA = re.compile(
    r"(?P<topic>[^、。はがをのにでと\s]{1,20})(?:に関する|についての|に関連する)"
)
_PAGE_COUNT_JA = re.compile(
    r"何ページ(?:あり|ある|です|から(?:なり|成)|で構成)|総ページ数|ページ数|何枚のスライド"
    r"|スライド(?:の)?枚数"
)

#: The keywords one of the patterns needs: a question with none of them is not read further.
_CUE_WORDS_EN = (
    "how many", "number of", "count", "list", "enumerate", "which page", "which slide",
    "what page", "what slide",
)  # fmt: skip
_CUE_CHARS_JA = (
    "いくつ", "幾つ", "何", "数", "一覧", "列挙", "挙げ", "リスト", "どの",
)  # fmt: skip

#: Words of a question that say nothing about what is counted ("in total in the report").
_GENERIC = frozenset(
    tokenize(
        "there total in all altogether overall whole entire document documents report reports "
        "paper article deck presentation file pdf book manual brochure page pages slide slides "
        "figure figures chart charts graph graphs plot plots table tables image images picture "
        "pictures photo photos diagram diagrams illustration illustrations equation equations "
        "formula formulas this that these those it its their them does do did is are was were be "
        "have has having contain contains containing include includes including show shows "
        "showing shown appear appears appearing present presented display displayed given used "
        "provided find found count counted number many much list listed which what how please "
        "inside within any some each every one least more distinct different separate unique "
        "individual related relating about regarding concerning mention mentions mentioning "
        "discuss discusses refer refers cover covers talk talks depict depicts illustrate with "
        "feature features featuring exist exists span spans spanning long occupy occupies take "
        "takes run runs"
    )
)


@dataclass(frozen=True)
class CountQuestion:
    """What a counting question asks (:func:`count_question`)."""

    target: Target
    #: The noun as the answer names it ("slides", "bar charts", "tables").
    noun: str
    #: Count the pages that show ``target`` ("how many pages contain tables"), not the items.
    per_page: bool = False
    listing: bool = False
    #: Kind words an item's caption or labels must carry ("bar", "pie").
    kinds: tuple[str, ...] = ()
    #: A chart over years: at least two distinct years among its labels.
    over_years: bool = False
    #: Topic terms (index terms, :func:`pagesight.models.text.tokenize`); ``quoted``: the
    #: question quoted them, and all of them must match.
    terms: tuple[str, ...] = ()
    quoted: bool = False
    #: A section, chapter, note, appendix, titled section or page range.
    scope: StructuralReference | None = None
    #: "the first 10 pages" (n > 0) or "the last 5 slides" (n < 0).
    edge: int | None = None

    @property
    def counts_pages(self) -> bool:
        """Pages are counted (``per_page``, or a page count such as "how many slides")."""
        return self.per_page or self.target == "page"


def has_count_cue(query: str) -> bool:
    """A substring test for the keywords a counting question needs (cheap: it runs on every
    search; the patterns run only when it passes)."""
    if len(query) > MAX_QUESTION_CHARS:
        return False
    lowered = query.lower()
    return any(word in lowered for word in _CUE_WORDS_EN) or any(
        char in query for char in _CUE_CHARS_JA
    )


def count_question(query: str) -> CountQuestion | None:
    """The counting question ``query`` asks, or None (most queries; module doc)."""
    if not has_count_cue(query):
        return None
    text = unicodedata.normalize("NFKC", query)
    return _english(text) or _japanese(text)


def _cue_sentence(text: str, start: int) -> tuple[int, int]:
    """Bounds of the sentence holding ``start``: an instruction after the question ("Please
    answer in integer format.") is not part of what is counted."""
    ends = [m.end() for m in re.finditer(r"[?？。!]|\.(?=\s|$)", text)]
    begin = max((e for e in ends if e <= start), default=0)
    finish = min((e for e in ends if e > start), default=len(text))
    return begin, finish


def _kinds_of(words: str | None) -> tuple[str, ...]:
    if not words:
        return ()
    return tuple(w for w in re.split(r"[\s-]+", words.lower()) if w)


def _noun_en(noun: str) -> tuple[Target, str]:
    word = noun.lower().rstrip(".")
    singular = word[:-1] if word.endswith("s") and word not in ("formulas",) else word
    singular = {"formula": "formula", "formulae": "formula", "formulas": "formula"}.get(
        word, singular
    )
    target = _NOUNS_EN.get(singular, "figure")
    shown = {"fig": "figure", "formula": "equation"}.get(singular, singular)
    return target, shown + "s"


def _english(text: str) -> CountQuestion | None:
    match = _CUE_EN.search(text)
    if match is None:
        return None
    cue = " ".join(match.group("cue").lower().split())
    target, noun = _noun_en(match.group("noun"))
    kinds = _kinds_of(match.group("kinds"))
    listing = cue.startswith(("list", "enumerate", "which", "what", "on ", "in "))
    if cue.endswith(("which", "what")) and target != "page":
        return None  # "what tables show revenue?" asks about their content, not a count
    finish = _cue_sentence(text, match.start())[1]
    rest = text[match.end() : finish]
    per_page = False
    if target == "page":
        shown = _PER_PAGE_EN.match(rest)
        if shown is not None:
            target, item_noun = _noun_en(shown.group("noun"))
            if target != "page":
                per_page = True
                kinds = _kinds_of(shown.group("kinds"))
                noun = item_noun
                rest = rest[shown.end() :]
    scope, edge, spans = _scope(text)
    rest = _without(rest, [(a - match.end(), b - match.end()) for a, b in spans])
    over_years = bool(_YEARS_CUE.search(rest))
    rest = _YEARS_CUE.sub(" ", rest)
    terms, quoted = _terms(rest)
    if target == "page" and terms and not _MENTION_EN.search(rest):
        return None  # "how many pages for the hatom type": a number the document prints
    if kinds:
        noun = " ".join(kinds) + " " + noun
    return CountQuestion(
        target=target,
        noun=noun,
        per_page=per_page,
        listing=listing,
        kinds=kinds,
        over_years=over_years,
        terms=terms,
        quoted=quoted,
        scope=scope,
        edge=edge,
    )


_JA_NOUN_NAMES = {"page": "pages", "figure": "figures", "chart": "charts", "table": "tables"}


def _noun_ja(noun: str, kinds: str | None) -> tuple[Target, str, tuple[str, ...]]:
    target = _NOUNS_JA[noun]
    shown = "slides" if noun == "スライド" else _JA_NOUN_NAMES.get(target, target + "s")
    kind = (_KINDS_JA[kinds],) if kinds else ()
    if kind and target == "figure":
        target = "chart"
    return target, (" ".join(kind) + " " + shown).strip(), kind


def _japanese(text: str) -> CountQuestion | None:
    per_page = False
    listing = False
    found: tuple[Target, str, tuple[str, ...]] | None = None
    shown = _PER_PAGE_JA.search(text)
    which = _WHICH_JA.search(text)
    if shown is not None and (which or any(p.search(text) for p in _CUE_JA) or "何" in text):
        found = _noun_ja(shown.group("noun"), shown.group("kinds"))
        per_page = found[0] != "page"
        listing = which is not None
    if found is None:
        for pattern in _CUE_JA:
            match = pattern.search(text)
            if match is not None:
                found = _noun_ja(match.group("noun"), match.group("kinds"))
                break
    if found is None:
        listed = _LIST_JA.search(text)
        if listed is not None:
            found = _noun_ja(listed.group("noun"), listed.group("kinds"))
            listing = True
    if found is None and _PAGE_COUNT_JA.search(text):
        found = ("page", "slides" if "スライド" in text else "pages", ())
    if found is None:
        return None
    target, noun, kinds = found
    scope, edge, _ = _scope(text)
    topic = _TOPIC_JA.search(text)
    terms: tuple[str, ...] = ()
    if topic is not None and target != "page":
        terms = tuple(dict.fromkeys(tokenize(topic.group("topic"))))
    return CountQuestion(
        target=target,
        noun=noun,
        per_page=per_page,
        listing=listing,
        kinds=kinds,
        over_years=bool(_YEARS_CUE.search(text)),
        terms=terms,
        scope=scope,
        edge=edge,
    )


_SCOPE_KINDS = frozenset({"section", "chapter", "note", "appendix", "titled", "page", "slide"})


def _scope(text: str) -> tuple[StructuralReference | None, int | None, list[tuple[int, int]]]:
    """The scope a question names, the first/last N pages, and where they are in ``text`` (the
    words that name them are no topic)."""
    spans: list[tuple[int, int]] = []
    between = _BETWEEN_PAGES.search(text)
    if between is not None:
        slides = between.group("kind").lower().startswith("slide")
        spans.append(between.span())
        reference = StructuralReference(
            kind="slide" if slides else "page",
            text=between.group(0),
            value=between.group("a"),
            end=between.group("b"),
        )
        return reference, None, spans
    edge_match = _FIRST_LAST.search(text)
    edge = None
    if edge_match is not None:
        spans.append(edge_match.span())
        n = int(edge_match.group("n") or edge_match.group("n_ja"))
        last = (edge_match.group("end") or "").lower() == "last" or edge_match.group("end_ja") in (
            "最後",
            "末尾",
        )
        edge = -n if last else n
    for reference in parse_references(text):
        if reference.kind in _SCOPE_KINDS:
            at = text.find(reference.text)
            if at >= 0:
                spans.append((at, at + len(reference.text)))
            return reference, edge, spans
    return None, edge, spans


def _without(text: str, spans: Iterable[tuple[int, int]]) -> str:
    for start, end in sorted(spans, reverse=True):
        if end > 0 and start < len(text):
            text = text[: max(start, 0)] + " " + text[max(end, 0) :]
    return text


def _terms(rest: str) -> tuple[tuple[str, ...], bool]:
    """Topic terms of the words after the noun: the quoted ones when any, else the content
    words that are not about counting or the document itself."""
    quoted = [q for q in _QUOTED.findall(rest) if q.strip()]
    if quoted:
        terms = [t for q in quoted for t in tokenize(q)]
        return tuple(dict.fromkeys(terms)), True
    terms = [t for t in tokenize(rest) if t not in _GENERIC and not t.isdigit()]
    return tuple(dict.fromkeys(terms))[:6], False
