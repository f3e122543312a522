"""Which documents a query names: its company, ticker, title or file name, qualified by the
year, quarter and kind of report it asks about (issue 34).

:class:`IdentityIndex` holds the name forms of every document of a tenant
(:class:`~pagesight.core.identity.DocumentIdentity`), keyed by their first word so that a
query is matched by looking its words up, whatever the number of documents. What counts as a
mention, and why:

- **a name, whole** ("Globex", "Acme Widgets", "American Express"): its identifying words, in
  order, without the legal form;
- **the start of a longer name** ("Initech" for "Initech Software International", "Acme"
  for "Acme Widgets"), only when that word is capitalised in the query and is not a common
  word of names ("American", "General", "National":
  :data:`~pagesight.core.identity.COMMON_NAME_WORDS`), so that "American workers" names no
  company;
- **a ticker or a short form** (ticker "GBX" read on the page; "J&J"/"JnJ" of a name with "&";
  "AmEx" of a two-word name; the initials of a longer one), only as a word written with at
  least two capitals, so that an ordinary lower-case word never matches one;
- **three words of its title** in a row, or its whole title when shorter;
- **its file name**, or a distinctive word of it ("globex" in ``GLOBEX_2022_10K.pdf``), also
  written as two or three words ("American Express"): users' files often have such names.

A year, a quarter or a form in the query ("FY2022", "Q4", "10-K") weighs the documents a name
matched: several years of one company stay ambiguous, and the route keeps them all, the
asked-about one first. A word shared by two names matches neither unless it is the start of
the one and capitalised (test: companies that share words).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from pagesight.core.identity import COMMON_NAME_WORDS, DocumentIdentity, name_tokens

#: Strength of each kind of mention (a whole name is certain; a short form less so).
NAME, PREFIX, ALIAS, TITLE, FILE = 1.0, 0.7, 0.85, 0.6, 0.8
#: Words of a file name that say nothing of which document it is.
GENERIC_FILE_WORDS = frozenset(
    {
        "final", "draft", "report", "reports", "earnings", "annual", "release", "copy", "scan",
        "scanned", "doc", "document", "slides", "slide", "deck", "presentation", "manual",
        "user", "pdf", "conversion", "version", "rev", "the", "and", "for", "new",
    }
)  # fmt: skip
_TITLE_STOP = frozenset(
    {"the", "and", "for", "of", "in", "on", "a", "an", "to", "with", "from", "by", "at", "its"}
)
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9&.'’\-]*")
_YEAR = re.compile(r"\b(?:FY\s*'?)?((?:19|20)\d\d)\b|\bFY\s*'?(\d\d)\b", re.IGNORECASE)
_QUARTER = re.compile(r"\bQ([1-4])\b|\b([1-4])Q\b|\b(first|second|third|fourth)[- ]quarter\b", re.I)
_QUARTERS = {"first": 1, "second": 2, "third": 3, "fourth": 4}
_KINDS = (
    (re.compile(r"\b10-?K\b", re.I), "10-K"),
    (re.compile(r"\b10-?Q\b", re.I), "10-Q"),
    (re.compile(r"\b8-?K\b", re.I), "8-K"),
    (re.compile(r"\bannual report\b", re.I), "annual report"),
    (
        re.compile(r"\b(?:earnings|results) (?:release|report)|press release\b", re.I),
        "earnings release",
    ),
)
_HEXISH = re.compile(r"[0-9a-f]{12,}")


@dataclass(frozen=True)
class NameForm:
    """One way a document may be named: its words in order, how strong a mention it is, and
    what the word must look like in the query."""

    doc_id: str
    words: tuple[str, ...]
    how: str
    strength: float
    label: str
    #: "capital": the first word capitalised in the query; "upper": written with >= 2 capitals
    case: str | None = None


@dataclass(frozen=True)
class DocumentMention:
    """A document the query names: how sure (0..1, after the period and kind), and what was
    recognised (for the trace)."""

    doc_id: str
    score: float
    how: str
    matched: str

    def describe(self) -> str:
        return f"doc:{self.doc_id} {self.how} {self.matched!r}"


@dataclass(frozen=True)
class QueryWord:
    raw: str
    lower: str


def query_words(query: str) -> list[QueryWord]:
    """The query's words as names are matched: possessives and trailing dots dropped."""
    words = []
    for match in _WORD.finditer(query):
        raw = re.sub(r"['’]s?$", "", match.group().rstrip(".-"))
        if raw:
            words.append(QueryWord(raw, raw.lower()))
    return words


def name_forms(doc_id: str, identity: DocumentIdentity) -> list[NameForm]:
    """Every form of ``identity`` a query may name it by (module doc)."""
    forms: list[NameForm] = []
    for name in identity.names:
        words = name_tokens(name)
        variants = [words]
        if words and words[-1].endswith(".com"):
            variants.append([*words[:-1], words[-1].removesuffix(".com")])
        for tokens in variants:
            forms += _name_forms(doc_id, name, tokens)
        forms += _short_forms(doc_id, name, words)
    for alias in identity.aliases:
        if len(alias) >= 2:
            forms.append(NameForm(doc_id, (alias.lower(),), "ticker", ALIAS, alias, "upper"))
    if identity.title:
        forms += _title_forms(doc_id, identity.title)
    if identity.file_name:
        forms += _file_forms(doc_id, identity.file_name)
    return forms


def _distinctive(word: str) -> bool:
    return word not in COMMON_NAME_WORDS and (len(word) >= 4 or any(c.isdigit() for c in word))


def _name_forms(doc_id: str, name: str, words: list[str]) -> list[NameForm]:
    if not words:
        return []
    forms = []
    if len(words) > 1 or _distinctive(words[0]):
        forms.append(NameForm(doc_id, tuple(words), "name", NAME, name))
    if len(words) > 1 and _distinctive(words[0]):
        forms += [
            NameForm(doc_id, tuple(words[:k]), "name start", PREFIX, name, "capital")
            for k in range(1, len(words))
        ]
    return forms


def _short_forms(doc_id: str, name: str, words: list[str]) -> list[NameForm]:
    """ "J&J"/"JnJ" of "Johnson & Johnson", "AmEx" of "American Express", "IBM" of
    "International Business Machines": written with capitals in the query."""
    alpha = [w for w in words if w.isalpha()]
    if len(alpha) != len(words) or not words:
        return []
    shorts: set[str] = set()
    if "&" in name and len(words) == 2:
        shorts |= {f"{words[0][0]}&{words[1][0]}", f"{words[0][0]}n{words[1][0]}"}
    if len(words) == 2:
        shorts |= {a[:i] + b[:j] for a, b in [words] for i in (2, 3, 4) for j in (2, 3)}
    if len(words) >= 3:
        shorts.add("".join(w[0] for w in words))
    return [NameForm(doc_id, (s,), "short form", ALIAS, name, "upper") for s in sorted(shorts)]


def _title_forms(doc_id: str, title: str) -> list[NameForm]:
    words = [w.lower() for w in re.findall(r"[A-Za-z0-9]+", title)]
    content = [w for w in words if w not in _TITLE_STOP and len(w) >= 3]
    if len(content) < 2:
        return []
    if len(content) <= 3:
        return [NameForm(doc_id, tuple(content), "title", TITLE, title)]
    return [
        NameForm(doc_id, tuple(content[i : i + 3]), "title", TITLE, title)
        for i in range(len(content) - 2)
    ]


def _file_forms(doc_id: str, file_name: str) -> list[NameForm]:
    stem = file_name.rsplit(".", 1)[0].lower()
    forms = [NameForm(doc_id, (file_name.lower(),), "file name", NAME, file_name)]
    for word in re.split(r"[_\-.\s]+", stem):
        if (
            len(word) >= 3
            and any(c.isalpha() for c in word)
            and not _HEXISH.fullmatch(word)
            and word not in GENERIC_FILE_WORDS
            and word not in COMMON_NAME_WORDS
            and not re.fullmatch(r"(?:19|20)\d\d(?:q[1-4])?|q[1-4]|v\d+|\d+[kq]", word)
        ):
            # a proper noun in the query: "views" in a question is no file's "Views"
            forms.append(NameForm(doc_id, (word,), "file name", FILE, file_name, "capital"))
    return forms


class IdentityIndex:
    """The name forms of a set of documents, by their first word (module doc)."""

    def __init__(self, identities: Iterable[tuple[str, DocumentIdentity]]) -> None:
        self.identities: dict[str, DocumentIdentity] = {}
        self._forms: dict[str, list[NameForm]] = {}
        for doc_id, identity in identities:
            self.identities[doc_id] = identity
            for form in name_forms(doc_id, identity):
                self._forms.setdefault(form.words[0], []).append(form)

    def __len__(self) -> int:
        return len(self.identities)

    def mentions(
        self,
        query: str,
        admitted: Callable[[str], bool],
        limit: int = 3,
        file_names: bool = True,
    ) -> list[DocumentMention]:
        """The documents ``query`` names among those ``admitted``, most certain first: at
        most ``limit``, each at least half as certain as the first. ``file_names``: whether
        a file name counts (off where names are content addresses or say nothing)."""
        words = query_words(query)
        best: dict[str, tuple[float, NameForm]] = {}
        for form in self._matches(words):
            if not admitted(form.doc_id) or (form.how == "file name" and not file_names):
                continue
            if form.doc_id not in best or form.strength > best[form.doc_id][0]:
                best[form.doc_id] = (form.strength, form)
        if not best:
            return []
        asked = _asked(query)
        scored = [
            DocumentMention(
                doc_id,
                round(strength * _qualified(self.identities[doc_id], *asked), 3),
                form.how,
                form.label,
            )
            for doc_id, (strength, form) in best.items()
        ]
        # equally sure: the latest period first (a question with no year asks of the latest)
        scored.sort(key=lambda m: (-m.score, -max(self.identities[m.doc_id].years, default=0)))
        top = scored[0].score
        return [m for m in scored if m.score >= top / 2][:limit]

    def _matches(self, words: list[QueryWord]) -> Iterable[NameForm]:
        lowers = [w.lower for w in words]
        for i, word in enumerate(words):
            for form in self._forms.get(word.lower, ()):
                if (
                    form.how != "title"
                    and tuple(lowers[i : i + len(form.words)]) == form.words
                    and _case_ok(form, word.raw)
                ):
                    yield form
            for n in (2, 3):  # words written apart that a file name joins ("American Express")
                joined = "".join(lowers[i : i + n]) if i + n <= len(lowers) else ""
                for form in self._forms.get(joined, ()):
                    if (
                        form.how == "file name"
                        and len(form.words) == 1
                        and _case_ok(form, word.raw)
                    ):
                        yield form
        content = [w for w in lowers if w not in _TITLE_STOP and len(w) >= 3]
        for i, term in enumerate(content):  # a title is matched by its content words
            for form in self._forms.get(term, ()):
                if form.how == "title" and tuple(content[i : i + len(form.words)]) == form.words:
                    yield form


def _case_ok(form: NameForm, raw: str) -> bool:
    if form.case == "capital":
        return raw[:1].isupper() or raw[:1].isdigit()
    if form.case == "upper":
        return sum(c.isupper() for c in raw) >= 2
    return True


def _asked(query: str) -> tuple[set[int], int | None, str | None]:
    """The years, quarter and kind of report the query asks about."""
    years = set()
    for match in _YEAR.finditer(query):
        years.add(int(match.group(1)) if match.group(1) else 2000 + int(match.group(2)))
    quarter = None
    found = _QUARTER.search(query)
    if found:
        quarter = int(found.group(1) or found.group(2) or _QUARTERS[found.group(3).lower()])
    kind = next((name for pattern, name in _KINDS if pattern.search(query)), None)
    return years, quarter, kind


def _qualified(
    identity: DocumentIdentity, years: set[int], quarter: int | None, kind: str | None
) -> float:
    """How well the document's period and kind fit what the query asks (1: fits or not
    asked; less: unknown; least: another period or kind)."""
    factor = 1.0
    if years:
        factor *= 0.8 if not identity.years else 1.0 if years & set(identity.years) else 0.5
    if quarter is not None and identity.quarter is not None and identity.quarter != quarter:
        factor *= 0.7
    if kind is not None and identity.kind is not None and identity.kind != kind:
        factor *= 0.6
    return factor
