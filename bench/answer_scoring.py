"""Answer scoring in the manner of MMLongBench-Doc: take one value out of a free-text answer,
then score that value against the gold answer by its answer format.

Why: a rule that accepts a matching number *anywhere* in the answer rewards quoting more (a
whole table row holds the gold figure and four wrong ones). Scoring one extracted value makes a
longer answer no more likely to count.

Pure functions, no model calls. The scoring rules follow the benchmark's ``eval/eval_score.py``
(mayubo2333/MMLongBench-Doc); this is an independent implementation of them:

- **Int**: the predicted number must equal the gold integer.
- **Float**: equal within 1 % relative tolerance, or equal once both are rounded to the coarser
  of their two decimal precisions (at least 2 decimals); the gold is also tried as gold / 100
  and gold * 100, so "12.5%" matches a gold 0.125 and a gold 12.5.
- **Str**: both sides cleaned (lower case, a parenthesised aside dropped, surrounding quotes, a
  leading ``$`` and a trailing ``%`` removed); strings the benchmark matches exactly (URLs,
  file names, "page ...", digit strings such as phone numbers, times with a.m./p.m., dates,
  e-mail addresses) must be equal, anything else scores ANLS: 1 - Levenshtein distance / the
  longer length, and 0 when that is 0.5 or less.
- **List**: the gold is a list literal (``"['2006', '2007']"``); lists of different lengths
  score 0; otherwise both are cleaned and sorted, paired element by element, and the score is
  the lowest element score.
- **None** (unanswerable): 1 when the prediction is "Not answerable".
- **accuracy** is the mean score; **F1** is the benchmark's: recall = the summed score of the
  answerable questions / how many are answerable, precision = the same sum / how many
  predictions are not "Not answerable" (answering an unanswerable question lowers precision,
  abstaining on an answerable one lowers recall), F1 their harmonic mean.

Where this differs from the benchmark:

- **No LLM extraction step.** The benchmark asks GPT-4o to pull the answer out of the response;
  :func:`extract_value` does it by rules, by format (see there). It is stricter than a model on
  verbose answers ("The largest group is Europe." does not reduce to "Europe").
- Gold answers labelled Int or Float that are not numbers (``"14:04 CET"``, ``"yes"``) are
  scored as Str; the benchmark scores them 0 for every system.
- Int: a prediction of 3.9 does not count for a gold 3 (the benchmark truncates to an int);
  thousands separators are removed on both sides.
- Str: any plain number (``"1.30"``) is matched exactly, as a number; whitespace is collapsed.
- List: each element is matched by its own kind (numbers and exact-match strings exactly, other
  strings by ANLS) where the benchmark picks one rule for the whole list from its first sorted
  gold element; two empty lists score 1 (the benchmark fails on them).
- None: only the canonical "Not answerable" scores (the benchmark's ANLS would give partial
  credit to a near spelling); :func:`extract_value` maps abstention phrases onto it.
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

NOT_ANSWERABLE = "Not answerable"
FORMATS = ("Int", "Float", "Str", "List", "None")

Prediction = str | list[str] | None

# -- text helpers ------------------------------------------------------------------------------

#: ``[1]``, ``[2, 3]``: citation markers, which would otherwise read as numbers or list literals.
_CITATION = re.compile(r"\s*\[\d+(?:\s*[,;–-]\s*\d+)*\]")
#: A sentence ends at ``. ! ?`` (and closing quotes) before whitespace, or at a line break.
_SENTENCE_END = re.compile(r"[.!?][\"'”’)\]]*(?=\s)|\n")
#: Words whose trailing period does not end a sentence (initials such as "S.V." neither).
_ABBREVIATIONS = frozenset(
    ("mr", "mrs", "ms", "dr", "st", "vs", "etc", "no", "inc", "co", "ltd", "jr", "sr", "fig")
)
_INITIALS = re.compile(r"(?:[a-z]\.)*[a-z]")

_ABSTENTION = re.compile(
    r"\bnot\s+answerable\b|\bunanswerable\b"
    r"|\b(?:cannot|can\s*not|can't|could\s+not|couldn't)\s+be\s+(?:answered|determined|found)\b"
    r"|\b(?:cannot|can\s*not|can't|could\s+not|couldn't|unable\s+to)\s+(?:find|determine|answer)\b"
    r"|\b(?:does|do|did)\s*(?:not|n't)\s+"
    r"(?:say|mention|specify|state|provide|contain|include|give|report|show)\b"
    r"|\b(?:is|are|was|were)\s+not\s+(?:mentioned|specified|stated|provided|given|reported)\b"
    r"|\bno\s+(?:information|mention)\b|\b(?:not\s+enough|insufficient)\s+information\b",
    re.IGNORECASE,
)

_BOILERPLATE = re.compile(
    r"^(?:(?:the\s+)?(?:final\s+)?answer\b\s*(?:is\b\s*)?[:\-–]?\s*"
    r"|(?:according\s+to|based\s+on|from|in)\s+(?:the\s+|this\s+)?"
    r"(?:document|documents|report|text|chart|table|figure|page|slide|survey|data)\b[^,]*,\s*)",
    re.IGNORECASE,
)

#: A number as written in an answer: optional sign and ``$``, thousands separators, decimals,
#: and an optional ``%``. Not part of a word ("Q4", "H@10", "FY2022", "10K" are not numbers).
_NUMBER = re.compile(
    r"(?<![\w.@/])(?P<sign>[-−])?(?P<dollar>\$\s?)?"
    r"(?P<digits>\d{1,3}(?:,\d{3})+|\d+)(?P<fraction>\.\d+)?(?![\w@])(?:\s?(?P<percent>%))?"
)
_NUMBER_WORD_LIST = (
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
    "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen",
    "nineteen", "twenty",
)  # fmt: skip
_NUMBER_WORDS = {word: n for n, word in enumerate(_NUMBER_WORD_LIST)}
_NUMBER_WORD = re.compile(r"\b(" + "|".join(_NUMBER_WORDS) + r")\b", re.IGNORECASE)
#: A plain number on its own: what the gold answer of a numeric question looks like.
_PLAIN_NUMBER = re.compile(r"[-−+]?\$?\s?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?\s?%?|[-+]?\.\d+%?")
_PLAIN_INT = re.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)")

_BULLET = re.compile(r"^\s*(?:[-*•·▪‣]|\(?\d{1,2}[.)])\s+")
_LIST_LEAD = re.compile(r"\b(?:are|is|were|was|include|includes|included)\b\s+", re.IGNORECASE)
#: Item separators of a one-line list; a comma between digits ("1,500") is not one.
_ITEM_SEPARATOR = re.compile(r";|(?<!\d),|,(?!\d{3}\b)")
_LIST_LITERAL = re.compile(r"\[[^\[\]]*\]")


def strip_citations(text: str) -> str:
    return _CITATION.sub("", text)


def sentences(text: str) -> list[str]:
    """The sentences of ``text``, in order: split after ``. ! ?`` before whitespace (not after an
    abbreviation, an initial or a number's decimal point) and at line breaks."""
    out: list[str] = []
    start = 0
    for match in _SENTENCE_END.finditer(text):
        if match.group() != "\n":
            before = text[start : match.start()].split()
            word = before[-1].casefold().rstrip(".") if before else ""
            if word in _ABBREVIATIONS or _INITIALS.fullmatch(word):
                continue
        piece = text[start : match.end()].strip()
        if piece:
            out.append(piece)
        start = match.end()
    tail = text[start:].strip()
    if tail:
        out.append(tail)
    return out


def is_abstention(text: str) -> bool:
    """Whether the answer's first sentence says the documents do not answer the question."""
    first = sentences(strip_citations(text))
    return bool(first) and bool(_ABSTENTION.search(first[0]))


def _trim(text: str) -> str:
    """Whitespace collapsed; table pipes, boilerplate lead-ins, surrounding quotes and final
    sentence punctuation removed."""
    text = " ".join(text.replace("|", " ").split())
    text = _BOILERPLATE.sub("", text, count=1)
    return text.strip().strip("\"'“”‘’").rstrip(".!?;:,").strip().strip("\"'“”‘’").strip()


# -- extraction --------------------------------------------------------------------------------


def extract_value(answer_text: str, answer_format: str) -> Prediction:
    """One value out of a free-text answer, the way the benchmark's extraction step would give it,
    by rules instead of a model.

    Every format first checks for an abstention: when the first sentence says the documents do
    not answer ("not answerable", "the document does not mention ...", "cannot be determined",
    "no information", the engine's "The documents do not contain this."), the value is
    :data:`NOT_ANSWERABLE`. Then, by ``answer_format``:

    - Int / Float: the first number of the first sentence that has one. A bare four-digit year
      (1900-2100) is skipped when the sentence holds another number ("In 2020, 29 % ..." gives
      29). Thousands separators are removed, ``$`` dropped, ``%`` kept (Float scoring tries the
      percentage variants); a scale word is not applied ("12 million" gives 12), as the gold
      answers write figures the way the documents print them. An Int answer without digits may
      spell a number from zero to twenty. ``None`` when there is no number.
    - Str: the first sentence, trimmed of lead-ins ("The answer is", "According to the report,")
      and of final punctuation; an answer that opens with "Yes," or "No." gives that word.
    - List: a list literal in the answer (``['a', 'b']``) if there is one; else two or more
      bulleted or numbered lines; else the first sentence, after a colon or after its first
      "are / is / include", split on commas and semicolons, and on "and" before the last item
      (on every "and" when there is no comma).
    - None (the gold is "Not answerable"): the Str value, unless it is an abstention.
    """
    text = strip_citations(answer_text).strip()
    if not text:
        return None
    if is_abstention(text):
        return NOT_ANSWERABLE
    if answer_format in ("Int", "Float"):
        return _extract_number(text, answer_format)
    if answer_format == "List":
        return _extract_list(text)
    return _extract_string(text)


def _extract_number(text: str, answer_format: str) -> str | None:
    for sentence in sentences(text):
        found = list(_NUMBER.finditer(sentence))
        if not found:
            continue
        not_years = [m for m in found if not _is_bare_year(m)]
        match = (not_years or found)[0]
        sign = "-" if match.group("sign") else ""
        value = sign + match.group("digits").replace(",", "") + (match.group("fraction") or "")
        if answer_format == "Float" and match.group("percent"):
            value += "%"
        return value
    if answer_format == "Int":
        words = _NUMBER_WORD.search(sentences(text)[0])
        if words:
            return str(_NUMBER_WORDS[words.group(1).casefold()])
    return None


def _is_bare_year(match: re.Match[str]) -> bool:
    digits = match.group("digits")
    plain = not (match.group("fraction") or match.group("percent") or match.group("dollar"))
    return plain and len(digits) == 4 and 1900 <= int(digits) <= 2100


def _extract_string(text: str) -> str | None:
    first = sentences(text)[0]
    yes_no = re.match(r"(yes|no)\b\s*[,.;:!-]", first, re.IGNORECASE)
    if yes_no:
        return yes_no.group(1).capitalize()
    return _trim(first) or None


def _extract_list(text: str) -> list[str] | None:
    for literal in _LIST_LITERAL.findall(text):
        parsed = _parse_list_literal(literal)
        if parsed is not None:
            return parsed
    lines = [line for line in text.splitlines() if line.strip()]
    bulleted = [_BULLET.sub("", line) for line in lines if _BULLET.match(line)]
    if len(bulleted) >= 2:
        return [item for item in (_trim(line) for line in bulleted) if item]
    first = sentences(text)[0]
    if ":" in first:
        first = first.split(":", 1)[1]
    else:
        lead = _LIST_LEAD.search(first)
        if lead:
            first = first[lead.end() :]
    parts = [part.strip() for part in _ITEM_SEPARATOR.split(first)]
    parts = [part for part in parts if part]
    if not parts:
        return None
    if len(parts) == 1:
        parts = re.split(r"\s+and\s+", parts[0])
    else:
        last = re.sub(r"^(?:and|or)\s+", "", parts[-1])
        parts[-1:] = re.split(r"\s+and\s+", last, maxsplit=1)
    items = [_trim(re.sub(r"^(?:and|or)\s+", "", part)) for part in parts]
    return [item for item in items if item] or None


def _parse_list_literal(literal: str) -> list[str] | None:
    """``"['a', 'b']"`` or ``"[1500, 8000]"`` as a list of strings; ``None`` if it is not one."""
    try:
        value = ast.literal_eval(literal)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    if not isinstance(value, list | tuple):
        return None
    return [str(item) for item in value]


# -- formats -----------------------------------------------------------------------------------


def resolve_format(gold: str, declared: str | None) -> str:
    """The format to extract and score by.

    A declared Int or Float whose gold is not a plain number is scored as Str (an Int gold
    with decimals as Float). Without a declared format (FinanceBench and UDA questions carry
    none) it is inferred from the gold: "Not answerable" is None, a list literal is List, a
    plain integer Int, another plain number (``"12.5%"``, ``"$1577.00"``) Float, anything else
    (sentences too, which ANLS will rarely credit) Str.
    """
    gold = gold.strip()
    if declared in FORMATS:
        if declared == "Int" and not _PLAIN_INT.fullmatch(gold):
            return "Float" if _PLAIN_NUMBER.fullmatch(gold) else "Str"
        if declared == "Float" and not _PLAIN_NUMBER.fullmatch(gold):
            return "Str"
        return str(declared)
    if gold.casefold() == NOT_ANSWERABLE.casefold():
        return "None"
    if gold.startswith("[") and _parse_list_literal(gold) is not None:
        return "List"
    if _PLAIN_INT.fullmatch(gold):
        return "Int"
    if _PLAIN_NUMBER.fullmatch(gold):
        return "Float"
    return "Str"


# -- scoring -----------------------------------------------------------------------------------


def clean(value: str) -> str:
    """The benchmark's string normalisation: lower case, a parenthesised aside dropped,
    surrounding quotes, a leading ``$`` and a trailing ``%`` removed; whitespace collapsed."""
    text = " ".join(str(value).casefold().split())
    text = re.sub(r"\s*\([^)]*\)", "", text).strip()
    text = re.sub(r"^['\"]|['\"]$", "", text).strip()
    text = text.lstrip("$").strip()
    return text.rstrip("%").strip()


def parse_number(value: str) -> float | None:
    """A plain number (``"1,250"``, ``"-3.65%"``, ``"$1577.00"``) as a float, else ``None``."""
    text = value.strip().replace("−", "-")
    if not _PLAIN_NUMBER.fullmatch(text):
        return None
    text = text.replace("$", "").replace(",", "").replace("%", "").replace(" ", "")
    try:
        return float(text)
    except ValueError:
        return None


def _decimals(value: float) -> int:
    text = str(value)
    return len(text.split(".")[-1]) if "." in text and "e" not in text else 3


def float_equal(gold: float, predicted: float) -> bool:
    """The benchmark's Float rule: the gold, gold / 100 or gold * 100 within 1 % of the
    prediction, or equal to it once both are rounded to the coarser of their two decimal
    precisions (at least 2 decimals)."""
    for target in (gold / 100, gold, gold * 100):
        if math.isclose(target, predicted, rel_tol=0.01):
            return True
        places = max(min(_decimals(predicted), _decimals(target)), 2)
        if round(predicted, places) == round(target, places):
            return True
    return False


def levenshtein(a: str, b: str) -> int:
    """Edit distance (insertions, deletions, substitutions each cost 1)."""
    if len(a) < len(b):
        a, b = b, a
    previous = list(range(len(b) + 1))
    for i, char_a in enumerate(a, start=1):
        current = [i]
        for j, char_b in enumerate(b, start=1):
            current.append(
                min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (char_a != char_b))
            )
        previous = current
    return previous[-1]


def anls(gold: str, predicted: str, threshold: float = 0.5) -> float:
    """Normalised Levenshtein similarity, 0 at or below ``threshold`` (the benchmark's ANLS)."""
    longest = max(len(gold), len(predicted))
    similarity = 1.0 if longest == 0 else 1.0 - levenshtein(gold, predicted) / longest
    return similarity if similarity > threshold else 0.0


_EXACT_MATCH = (
    re.compile(r"\d+(?:-\d+|\s\d+)?"),  # digit strings, phone numbers
    re.compile(r"\d{4}[-\s]\d{2}[-\s]\d{2}"),  # YYYY-MM-DD
    re.compile(r"\d{4}[-\s]\d{2}"),  # YYYY-MM
    re.compile(r"[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\.[a-zA-Z]{2,}"),  # e-mail address
)


def needs_exact_match(cleaned: str) -> bool:
    """Strings the benchmark compares exactly rather than by ANLS (plus any plain number)."""
    return (
        "https://" in cleaned
        or cleaned.endswith((".py", "ipynb"))
        or cleaned.startswith("page")
        or "a.m." in cleaned
        or "p.m." in cleaned
        or any(pattern.fullmatch(cleaned) for pattern in _EXACT_MATCH)
        or parse_number(cleaned) is not None
    )


def _score_string(gold: str, predicted: str) -> float:
    gold_clean, predicted_clean = clean(gold), clean(predicted)
    if needs_exact_match(gold_clean):
        gold_number, predicted_number = parse_number(gold_clean), parse_number(predicted_clean)
        if gold_number is not None and predicted_number is not None:
            return float(gold_number == predicted_number)
        return float(gold_clean == predicted_clean)
    return anls(gold_clean, predicted_clean)


def _as_list(value: str | list[str]) -> list[str]:
    if isinstance(value, list):
        return [str(item) for item in value]
    text = value.strip()
    if text.startswith("["):
        parsed = _parse_list_literal(text)
        if parsed is not None:
            return parsed
    return [text]


def _list_item(value: str) -> str:
    """A cleaned list element; a number written the same way whatever its separators, so that
    "1,500" and "1500" sort to the same place."""
    cleaned = clean(value)
    number = parse_number(cleaned)
    return cleaned if number is None else format(number, ".15g")


def _score_list(gold: str, predicted: str | list[str]) -> float:
    gold_items = sorted(_list_item(item) for item in _as_list(gold))
    predicted_items = sorted(_list_item(item) for item in _as_list(predicted))
    if len(gold_items) != len(predicted_items):
        return 0.0
    if not gold_items:
        return 1.0
    return min(_score_string(g, p) for g, p in zip(gold_items, predicted_items, strict=True))


def score_value(gold: str, predicted: Prediction, answer_format: str) -> float:
    """The score (0..1) of one extracted value against the gold answer, by the benchmark's rules
    for ``answer_format`` (resolved with :func:`resolve_format` first; see the module doc)."""
    fmt = resolve_format(str(gold), answer_format)
    abstained = isinstance(predicted, str) and predicted.strip().casefold() == "not answerable"
    if fmt == "None" or abstained:
        return float(fmt == "None" and abstained)
    if predicted is None:
        return 0.0
    if fmt == "List":
        return _score_list(gold, predicted)
    text = ", ".join(predicted) if isinstance(predicted, list) else predicted
    if fmt == "Int":
        gold_number, predicted_number = parse_number(gold), parse_number(clean(text))
        return float(predicted_number is not None and predicted_number == gold_number)
    if fmt == "Float":
        gold_number, predicted_number = parse_number(clean(gold)), parse_number(clean(text))
        if gold_number is None or predicted_number is None:
            return 0.0
        return float(float_equal(gold_number, predicted_number))
    return _score_string(gold, text)


# -- aggregates --------------------------------------------------------------------------------


@dataclass(frozen=True)
class ScoredAnswer:
    """What the aggregates need of one question: whether its gold is an answer (not "Not
    answerable"), whether the prediction is one, and its score."""

    answerable: bool
    answered: bool
    score: float


def scored_answer(gold: str, predicted: Prediction, score: float) -> ScoredAnswer:
    not_answerable = NOT_ANSWERABLE.casefold()
    return ScoredAnswer(
        answerable=str(gold).strip().casefold() != not_answerable,
        answered=not (
            isinstance(predicted, str) and predicted.strip().casefold() == not_answerable
        ),
        score=score,
    )


def accuracy(items: Iterable[ScoredAnswer]) -> float | None:
    """The mean score; ``None`` for no questions."""
    scores = [item.score for item in items]
    return sum(scores) / len(scores) if scores else None


def f1(items: Sequence[ScoredAnswer]) -> float | None:
    """MMLongBench-Doc's F1: recall = summed score of the answerable questions / their number;
    precision = the same sum / the number of predictions that are not "Not answerable"; F1 their
    harmonic mean (0 when both are 0, or when nothing was answered). ``None`` when no question is
    answerable, where recall is undefined."""
    answerable = [item for item in items if item.answerable]
    if not answerable:
        return None
    answered = sum(1 for item in items if item.answered)
    correct = sum(item.score for item in answerable)
    if not answered or not correct:
        return 0.0
    recall, precision = correct / len(answerable), correct / answered
    return 2 * recall * precision / (recall + precision)
