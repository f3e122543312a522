"""The shared value types, by concern (DESIGN.md section 3), re-exported under their old name.

- :mod:`pagesight.core.document`: the parsed document model (BBox, Document, Page, Element,
TextLine,
  TextSpan, Chunk, ParsedDocument, ...);
- :mod:`pagesight.core.structure`: a document's own structure (page labels, sections, numbered
  items);
- :mod:`pagesight.core.access`: who may read what (AccessFilter, EVERYONE);
- :mod:`pagesight.core.jobs`: ingest jobs and the audit log;
- :mod:`pagesight.core.search`: sparse vectors, ranked pages, search results;
- :mod:`pagesight.core.traces`: what a query did (routes, references, multi-step, corrective,
answer);
- :mod:`pagesight.core.answers`: questions, passages, answers, citations, chat messages.

Every ``from pagesight.core.types import X`` keeps working; new code may import from the modules
above.
"""

from pagesight.core.access import EVERYONE, AccessFilter
from pagesight.core.answers import (
    AnswerEvent,
    AnswerResponse,
    AnswerSentence,
    AnswerToken,
    AnswerUnit,
    AnswerUnitKind,
    Candidates,
    ChatMessage,
    ChatResult,
    Citation,
    PageKey,
    PageScore,
    Passage,
    Policy,
    QueryText,
    Question,
    QuotePart,
    SearchFilters,
    UnicodeText,
    WithheldSentence,
)
from pagesight.core.document import (
    ATOMIC_KINDS,
    BBox,
    Chunk,
    Document,
    Element,
    ElementKind,
    OutlineEntry,
    Page,
    ParsedDocument,
    ParseWarning,
    SourceFormat,
    TextLine,
    TextSpan,
    source_name,
)
from pagesight.core.errors import ErrorCode
from pagesight.core.jobs import AuditEntry, IngestJob, JobState, JobStatus
from pagesight.core.search import PageHit, SearchResult, SparseVector
from pagesight.core.structure import (
    DocumentStructure,
    StructureItem,
    StructurePage,
    StructureSection,
)
from pagesight.core.traces import (
    AnswerTrace,
    CorrectiveTrace,
    FollowedReference,
    Grade,
    GradeRecord,
    ImageContextRef,
    MultiStepTrace,
    PlanKind,
    ReferenceKind,
    ResolvedReference,
    RetrievalTrace,
    RouteName,
    RouteTrace,
    SearchStep,
    StopReason,
    StructuralReference,
    VisionTrace,
)

__all__ = [
    "ATOMIC_KINDS",
    "EVERYONE",
    "AccessFilter",
    "AnswerEvent",
    "AnswerResponse",
    "AnswerSentence",
    "AnswerToken",
    "AnswerTrace",
    "AnswerUnit",
    "AnswerUnitKind",
    "AuditEntry",
    "BBox",
    "Candidates",
    "ChatMessage",
    "ChatResult",
    "Chunk",
    "Citation",
    "CorrectiveTrace",
    "Document",
    "DocumentStructure",
    "Element",
    "ElementKind",
    "ErrorCode",
    "FollowedReference",
    "Grade",
    "GradeRecord",
    "ImageContextRef",
    "IngestJob",
    "JobState",
    "JobStatus",
    "MultiStepTrace",
    "OutlineEntry",
    "Page",
    "PageHit",
    "PageKey",
    "PageScore",
    "ParseWarning",
    "ParsedDocument",
    "Passage",
    "PlanKind",
    "Policy",
    "QueryText",
    "Question",
    "QuotePart",
    "ReferenceKind",
    "ResolvedReference",
    "RetrievalTrace",
    "RouteName",
    "RouteTrace",
    "SearchFilters",
    "SearchResult",
    "SearchStep",
    "SourceFormat",
    "SparseVector",
    "StopReason",
    "StructuralReference",
    "StructureItem",
    "StructurePage",
    "StructureSection",
    "TextLine",
    "TextSpan",
    "UnicodeText",
    "VisionTrace",
    "WithheldSentence",
    "source_name",
]
