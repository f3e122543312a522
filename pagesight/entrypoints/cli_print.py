"""The human form of what ``pagesight search`` and ``pagesight answer`` print (README,
"Command line"): ranked pages, and an answer with its lead, supporting quotes and citations.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from pagesight.entrypoints.cli_common import out

if TYPE_CHECKING:
    from pagesight.api.models import SearchResponse
    from pagesight.core.types import AnswerResponse, AnswerUnit, Citation, Document


def _file_name(source_uri: str | None) -> str:
    """The file name of a document's source: the upload's name, else the URI's or path's last
    segment ("" when there is none)."""
    uri = source_uri or ""
    if uri.startswith("upload:"):
        return uri.removeprefix("upload:")
    return Path(urlsplit(uri).path).name


def _doc_label(doc_id: str, title: str | None, file_name: str | None) -> str:
    """``Title — file.pdf`` (one of them when the other is missing or the same); the id only
    when neither is known."""
    if title and file_name and title != file_name:
        return f"{title} — {file_name}"
    return title or file_name or doc_id


def _print_hits(response: SearchResponse) -> None:
    from rich.markup import escape

    out.print(
        f"[dim]route {response.route.value} — {response.elapsed_ms:.0f} ms — "
        f"trace {response.trace_id}[/dim]"
    )
    if not response.hits:
        out.print("no matching pages")
    for hit in response.hits:
        file_name = getattr(hit, "source_name", None) or _file_name(hit.source_uri)
        name = escape(_doc_label(hit.doc_id, hit.title, file_name))
        kinds = ", ".join(hit.kinds)
        out.print(
            f"[bold]{hit.rank:>2}. {name}  page {hit.page_number}[/bold]  "
            f"score {hit.score:.4f}  {kinds}"
        )
        out.print(f"    {hit.snippet}", markup=False)


def _cited_names(session: Any, response: AnswerResponse) -> dict[str, tuple[str, str]]:
    """doc id -> (title, file name) of each cited or related document the answer names
    incompletely (a server that fills no ``title``/``source_name``): from the documents list.
    Empty when nothing is missing, or when the list cannot be read (ids are shown then)."""
    quoted = [*response.citations, *response.related]
    if all(c.title and c.source_name for c in quoted):
        return {}
    try:
        documents: list[Document] = session.backend.documents(session.caller)
    except Exception:  # names are a nicety: the answer itself is printed all the same
        return {}
    return {d.doc_id: (d.title or "", _file_name(d.source_uri)) for d in documents}


def _quote_pages(citation: Citation) -> list[int]:
    """The pages the citation's quote is printed on, in reading order."""
    pages = [part.page_number for part in citation.parts] or [citation.page_number]
    return list(dict.fromkeys(pages))


def _citation_source(citation: Citation, names: dict[str, tuple[str, str]]) -> str:
    """``Title — file.pdf, p. 7`` (``pp. 7–8`` for a quote across a page break)."""
    known_title, known_file = names.get(citation.doc_id, ("", ""))
    label = _doc_label(
        citation.doc_id, citation.title or known_title, citation.source_name or known_file
    )
    pages = _quote_pages(citation)
    where = f"p. {pages[0]}" if len(pages) == 1 else f"pp. {pages[0]}–{pages[-1]}"
    return f"{label}, {where}{' (image block)' if citation.kind == 'image' else ''}"


def _one_line(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _marked(text: str, citations: Sequence[int]) -> str:
    return f"{text} {''.join(f'[{n}]' for n in citations)}" if citations else text


def _lead_text(lead: AnswerUnit) -> Any:
    """The lead with its citation markers; its value in bold where it is printed in it (a
    terminal shows the style; a pipe or file gets the plain text)."""
    from rich.text import Text

    shown = Text(_marked(lead.text, lead.citations))
    if lead.value:
        find = lead.text.rfind if lead.kind == "table_cell" else lead.text.find
        at = find(lead.value)
        if at >= 0:
            shown.stylize("bold", at, at + len(lead.value))
    return shown


def _print_answer(response: AnswerResponse, names: dict[str, tuple[str, str]]) -> None:
    """The human form of an answer (README, "Command line"):

    - the lead (the direct answer) with its ``[n]``, then ``  [n] Title — file.pdf, p. 7``;
      an LLM's other sentences after it; ``Supporting:`` quotes, shorter and indented; then
      ``Citations:``, one line each;
    - an abstention: its text, ``Why: reason`` and ``Related:`` passages;
    - an answer without a lead (an older server): its sentences with markers, then citations.
    """
    from pagesight.query.generation import render_cited

    if response.abstained:
        _print_abstention(response, names)
    elif response.lead is not None:
        _print_lead(response, response.lead, names)
    else:
        out.print(render_cited(response), markup=False)
    _print_citations(response, names)


def _print_abstention(response: AnswerResponse, names: dict[str, tuple[str, str]]) -> None:
    """An abstention: its text, ``Why: reason`` and ``Related:`` passages."""
    out.print(response.answer, markup=False)
    if response.reason:
        out.print(f"Why: {response.reason}", markup=False)
    if response.related:
        out.print("\nRelated:")
        for related in response.related:
            quote = _one_line(related.quote, 140)
            where = _citation_source(related, names)
            out.print(f"  - {where}" + (f": “{quote}”" if quote else ""), markup=False)


def _print_lead(
    response: AnswerResponse, lead: AnswerUnit, names: dict[str, tuple[str, str]]
) -> None:
    """The lead with its sources, an LLM's other sentences, then ``Supporting:`` quotes."""
    by_n = {c.n: c for c in response.citations}
    out.print(_lead_text(lead))
    for n in lead.citations:
        if n in by_n:
            out.print(f"  [{n}] {_citation_source(by_n[n], names)}", markup=False)
    if response.mode == "llm":
        rest = [s for s in response.sentences if s.text != lead.text]
        if rest:
            shown = " ".join(_marked(s.text, s.citations) for s in rest)
            out.print(f"\n{shown}", markup=False)
    if response.supporting:
        out.print("\nSupporting:")
        for unit in response.supporting:
            out.print(f"  - {_marked(_one_line(unit.text, 160), unit.citations)}", markup=False)


def _print_citations(response: AnswerResponse, names: dict[str, tuple[str, str]]) -> None:
    """``Citations:``, one line each (nothing when there are none)."""
    if response.citations:
        out.print("\nCitations:")
        for citation in response.citations:
            quote = _one_line(citation.quote, 160) if citation.quote else "(the page image)"
            out.print(
                f"[{citation.n}] {_citation_source(citation, names)}: “{quote}”", markup=False
            )
