"""Questions and answers: the question, the passages the candidate search hands the answer step,
the answer with its citations and quotes, streamed answer events, and the chat model's
messages and replies (the LLM role, :class:`pagesight.core.protocols.ChatModel`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from pagesight.core.document import BBox, TextSpan
from pagesight.core.traces import RetrievalTrace, RouteName


def _not_blank(text: str) -> str:
    if not text.strip():
        raise ValueError("must contain a non-whitespace character")
    return text


def _valid_unicode(text: str) -> str:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError("must be valid Unicode text (no lone surrogate escapes)") from exc
    return text


#: Text a request hands on (to the index, or back in a response): valid Unicode, else 422. JSON
#: may escape a lone surrogate (``"\\ud800"``), which no UTF-8 text holds; an unconstrained
#: ``str`` lets it through to fail deeper (the index's filter, serialising the response).
UnicodeText = Annotated[str, AfterValidator(_valid_unicode)]
#: A question or search: at least one non-whitespace character (a blank query matches nothing
#: a person meant, so it is refused rather than answered with arbitrary pages).
QueryText = Annotated[str, Field(min_length=1), AfterValidator(_not_blank)]
#: strict: uncited sentences are dropped and weak evidence abstains.
Policy = Literal["standard", "strict"]
#: A page: (doc_id, page_number).
PageKey = tuple[str, int]
#: A page and its visual score (None: not scored).
PageScore = tuple[PageKey, float | None]


class SearchFilters(BaseModel):
    model_config = ConfigDict(extra="forbid")

    doc_ids: list[UnicodeText] | None = Field(
        default=None, max_length=1000, description="only these documents (of the caller's tenant)"
    )


class Question(BaseModel):
    """A question to answer from the caller's documents (the HTTP request adds ``stream``)."""

    model_config = ConfigDict(extra="forbid")

    query: QueryText
    route: RouteName = RouteName.AUTO
    top_k_context: int = Field(
        default=8, ge=1, le=50, description="passages kept after reranking, before the budget"
    )
    policy: Policy = Field(
        default="standard",
        description=(
            "strict: uncited sentences are dropped and weak evidence abstains; the stricter of "
            "this and the server's policy applies"
        ),
    )
    filters: SearchFilters = Field(default_factory=SearchFilters)


class AnswerSentence(BaseModel):
    text: str
    citations: list[int] = Field(
        default_factory=list, description="numbers n of the citations supporting this sentence"
    )


class QuotePart(BaseModel):
    """The part of a quote printed on one page, with the boxes of exactly those characters."""

    page_number: int = Field(ge=1)
    text: str = Field(description="the quote's characters on this page, verbatim")
    bboxes: list[BBox] = Field(default_factory=list, description="PDF points, on this page")


class Citation(BaseModel):
    """One quote an answer cites: the page its characters are printed on, and what it says.

    ``page_number`` and ``bboxes`` are those of the quote's first part; a quote that runs across
    a page break has one entry per page in ``parts``."""

    n: int = Field(ge=1, description="the number sentences cite it by")
    doc_id: str
    page_number: int
    chunk_id: str = Field(description="the cited chunk; for a page image, the image block's id")
    kind: Literal["text", "image"] = Field(
        default="text", description="image: the model was shown the page (or a crop) itself"
    )
    element_ids: list[str] = Field(default_factory=list)
    bboxes: list[BBox] = Field(
        default_factory=list,
        description="boxes on this page, PDF points; for an image block, its crop (none = page)",
    )
    page_image_url: str = Field(description="relative URL of the page image, boxes highlighted")
    quote: str = Field(
        description="text of the block that supports the citing sentences; empty for an image"
    )
    parts: list[QuotePart] = Field(
        default_factory=list,
        description="the quote per page it is printed on, in reading order (two across a page "
        "break); empty for an image block",
    )
    title: str | None = Field(default=None, description="the cited document's title")
    source_name: str | None = Field(
        default=None, description="the cited document's file name (shown next to the title)"
    )


AnswerUnitKind = Literal["sentence", "list_item", "table_cell"]


class AnswerUnit(BaseModel):
    """One answer unit of an extractive answer: a sentence, a list item, or a table cell given
    with its row label and column header ("Net revenues — Q4 2022: $3.6 billion")."""

    text: str = Field(description="what is shown: the quoted sentence or item, or the cell")
    kind: AnswerUnitKind = "sentence"
    value: str | None = Field(
        default=None,
        description="the one value the unit quotes for the question (an amount, percent, "
        "count, date or name), verbatim; None when the question asks for none or it holds none",
    )
    citations: list[int] = Field(default_factory=list, description="numbers n of its citations")


class WithheldSentence(BaseModel):
    """A sentence of a streamed answer that was sent as tokens, then failed the citation check.

    Only streams have these: a complete answer is checked before anything is shown, so its
    unsupported sentences are never sent at all.
    """

    index: int = Field(ge=0, description="position among the streamed text's sentences, 0 first")
    text: str = Field(description="the sentence, citation markers removed")
    citations: list[int] = Field(default_factory=list, description="the numbers it cited")
    reason: str


class AnswerResponse(BaseModel):
    answer: str
    abstained: bool
    reason: str | None = Field(
        default=None,
        description="why it abstained, or what was withheld or fell back; None when clean",
    )
    sentences: list[AnswerSentence] = Field(default_factory=list)
    lead: AnswerUnit | None = Field(
        default=None,
        description="the direct answer, first: one unit (extractive) or the first sentence "
        "(LLM); None when abstained",
    )
    supporting: list[AnswerUnit] = Field(
        default_factory=list, description="extractive: shorter quotes that back the lead"
    )
    related: list[Citation] = Field(
        default_factory=list,
        description="with an abstention: the nearest passages, somewhere to look",
    )
    citations: list[Citation] = Field(default_factory=list)
    confidence: float = Field(ge=0.0, le=1.0, description="best evidence score on [0, 1]")
    mode: Literal["llm", "extractive"]
    trace_id: str
    withheld: list[WithheldSentence] = Field(
        default_factory=list,
        description=(
            "streamed answers only: sentences already sent as tokens that the citation check "
            "withheld; they are not in answer, so render answer, not the tokens"
        ),
    )


class AnswerToken(BaseModel):
    """A piece of a streamed answer's text as it is written (SSE ``event: token``); citation
    markers ``[n]`` included, unchecked until the final :class:`AnswerResponse`."""

    text: str


#: What a streamed answer yields: tokens, then exactly one checked :class:`AnswerResponse`.
AnswerEvent = AnswerToken | AnswerResponse


@dataclass(frozen=True)
class Passage:
    """A retrieved chunk on one page: what the candidate search hands the answer pipeline.

    ``bboxes`` are the chunk's boxes on ``page_number`` only (a chunk spanning pages is one
    passage per page); ``score`` is the candidate search's score, which the fused-score
    pass-through ranker reports as the confidence (so it should be calibrated to ``[0, 1]``).
    """

    chunk_id: str
    doc_id: str
    page_number: int
    text: str
    score: float = 0.0
    element_ids: list[str] = field(default_factory=list)
    bboxes: list[BBox] = field(default_factory=list)
    section_path: list[str] = field(default_factory=list)
    title: str | None = None
    #: where each piece of ``text`` is printed, on every page of the chunk (``TextSpan``)
    spans: list[TextSpan] = field(default_factory=list)
    #: the document's file name
    source_name: str | None = None


@dataclass
class Candidates:
    """What the candidate search found: passages best first, and the search's own trace."""

    passages: list[Passage]
    trace: RetrievalTrace | None = None


# -- chat models (the LLM role, pagesight.core.protocols.ChatModel) --------------------------------


@dataclass(frozen=True, slots=True)
class ChatMessage:
    """One message of the conversation.

    ``content`` is text, or a list of OpenAI content parts (``{"type": "text", ...}``,
    ``{"type": "image_url", ...}``) for a vision model that should see page images.
    """

    role: Literal["system", "user", "assistant"]
    content: str | list[dict[str, Any]]

    def to_dict(self) -> dict[str, Any]:
        return {"role": self.role, "content": self.content}


@dataclass(frozen=True, slots=True)
class ChatResult:
    """A completed reply.

    ``parsed`` is the decoded JSON when a ``json_schema`` was given (else None). Token counts are
    None when the server did not report usage. ``attempts`` counts the requests made, retries
    included, for metrics and tests.
    """

    text: str
    parsed: Any
    finish_reason: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    model: str
    attempts: int = 1
