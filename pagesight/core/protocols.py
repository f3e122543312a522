"""Role protocols (Haystack-style): what an engine must offer, not how it does it.

Engines are cheap to construct and load weights in ``warm_up()`` (or on first use), so that
building a pipeline, a CLI command or a Ray deployment never pays for models it does not call.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

import numpy as np
import numpy.typing as npt

from pagesight.core.errors import ErrorCode
from pagesight.core.types import (
    AccessFilter,
    AuditEntry,
    Candidates,
    ChatMessage,
    ChatResult,
    CorrectiveTrace,
    Document,
    DocumentState,
    DocumentStructure,
    IngestJob,
    JobState,
    Page,
    PageKey,
    PageScore,
    Passage,
    RetrievalTrace,
    RouteName,
    SparseVector,
)

if TYPE_CHECKING:
    from PIL import Image


@runtime_checkable
class TextEmbedder(Protocol):
    """Dense text embeddings, L2-normalised, one row per input."""

    @property
    def model_id(self) -> str:
        """Stamped into the index schema: changing it means a re-index."""
        ...

    @property
    def dim(self) -> int: ...

    @property
    def languages(self) -> frozenset[str] | None:
        """ISO 639-1 codes the model was trained for; ``None`` means multilingual."""
        ...

    def warm_up(self) -> None: ...

    def embed_documents(self, texts: Sequence[str]) -> npt.NDArray[np.float32]: ...

    def embed_query(self, text: str) -> npt.NDArray[np.float32]: ...


@runtime_checkable
class SparseEncoder(Protocol):
    """Sparse lexical vectors (BM25 term weights); the index applies IDF at query time."""

    @property
    def model_id(self) -> str:
        """Names the tokenizer and weighting; stamped into the index schema."""
        ...

    def encode_documents(self, texts: Sequence[str]) -> list[SparseVector]: ...

    def encode_query(self, text: str) -> SparseVector: ...


class PageEmbedding(Protocol):
    """A page image as late-interaction vectors.

    ``vectors`` holds every kept token row (padding dropped), L2-normalised; the rows flagged in
    ``image_mask`` are image patches in raster order over a ``grid`` of (rows, cols) cells that
    tile the page image, which is what maps a patch back to a box on the page.
    """

    vectors: npt.NDArray[np.float32]
    image_mask: npt.NDArray[np.bool_]
    grid: tuple[int, int]


@runtime_checkable
class PageEmbedder(Protocol):
    """Late-interaction page/query embedder (ColQwen2, ColPali, ...): MaxSim-comparable rows."""

    @property
    def model_id(self) -> str: ...

    @property
    def dim(self) -> int: ...

    def warm_up(self) -> None: ...

    def embed_pages(self, images: Sequence[Image.Image]) -> list[PageEmbedding]: ...

    def embed_queries(self, texts: Sequence[str]) -> list[npt.NDArray[np.float32]]: ...


# -- the query engine's roles ------------------------------------------------------------------

T = TypeVar("T")

#: ``(query, access, route, n)`` -> up to ``n`` passages ``access`` may read, best first, with
#: the search's trace: the answer pipeline's input; corrective retrieval and multi-step search
#: wrap one.
CandidateSearch = Callable[[str, AccessFilter, RouteName, int], Candidates]


@runtime_checkable
class Ranker(Protocol):
    """Scores passages against a query; higher means more relevant."""

    @property
    def model_id(self) -> str:
        """Names the scorer in traces."""
        ...

    def warm_up(self) -> None: ...

    def score(self, query: str, passages: Sequence[str]) -> npt.NDArray[np.float32]:
        """One float32 score per passage, in input order."""
        ...

    def rerank(
        self, query: str, candidates: Sequence[T], text_of: Callable[[T], str], top_k: int
    ) -> list[tuple[T, float]]:
        """At most ``top_k`` ``(candidate, score)`` pairs, best first; ties keep input order."""
        ...


class PageRanker(Protocol):
    """Scores candidate pages by how they look:
    :class:`pagesight.query.visual_rerank.VisualPageReranker` (exact ColQwen2 MaxSim) is one."""

    @property
    def model_id(self) -> str: ...

    def rerank(
        self, query: str, pages: Iterable[PageKey], access: AccessFilter
    ) -> list[PageScore]: ...


class ChatModel(Protocol):
    """What the pipeline needs of an LLM: :class:`pagesight.models.llm.OpenAiChatClient` is one."""

    def complete(
        self,
        messages: Sequence[ChatMessage | Mapping[str, Any]],
        *,
        json_schema: dict[str, Any] | None = None,
        schema_name: str = "answer",
        max_tokens: int | None = None,
        temperature: float | None = None,
    ) -> ChatResult: ...


@runtime_checkable
class StreamingChatModel(ChatModel, Protocol):
    """A :class:`ChatModel` that can also stream a reply's text (``OpenAiChatClient`` can); a
    model without ``stream`` still serves streamed answers, see
    :meth:`AnswerPipeline._stream_generation`."""

    def stream(
        self,
        messages: Sequence[ChatMessage | Mapping[str, Any]],
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
    ) -> Iterator[str]: ...


class PageImageSource(Protocol):
    """Stored page images for the answer context of a vision model
    (:class:`pagesight.services.page_images.StoredPageImages` reads the rendered pages).

    Returns the page's image and its size in PDF points (what evidence boxes are measured in),
    or None when there is no such page, no stored image, or ``access`` may not read the
    document: the same None either way, as everywhere a caller may not see something.
    """

    def page_image(
        self, access: AccessFilter, doc_id: str, page_number: int
    ) -> tuple[Image.Image, tuple[float, float]] | None: ...


class CorrectiveSearch(Protocol):
    """A candidate search that grades what it found and corrects itself once
    (:class:`pagesight.query.corrective.CorrectiveRetrieval`); its trace says what it did."""

    def run(
        self, query: str, access: AccessFilter, route: RouteName, n: int
    ) -> tuple[Candidates, CorrectiveTrace]: ...


class ConfidenceScorer(Protocol):
    """The answer step's confidence of each passage, on the scale abstention is calibrated on
    (:meth:`pagesight.query.answer.AnswerPipeline.confidences`)."""

    def confidences(self, query: str, passages: Sequence[Passage]) -> list[float]: ...


# -- repositories (operational state next to the index: SQLite, or PostgreSQL) -----------------


class CatalogRepository(Protocol):
    """Jobs, documents, pages, structure and the audit log: what operations need of ingested
    documents (the index holds what retrieval needs). One home for per-document data: SQLite
    (:class:`pagesight.store.catalog.Catalog`) and PostgreSQL for the cluster profile
    (:class:`pagesight.store.catalog_postgres.PostgresCatalog`) implement it, nothing else changes.

    Every method that reads documents, pages or audit entries takes the tenant (or a document,
    which carries it): no call can read across tenants. Jobs are read by id (callers check the
    tenant of what they get) or listed per tenant."""

    def close(self) -> None: ...

    # jobs: the state machine of ingestion, and the queue a restart resumes
    def new_job(
        self,
        *,
        tenant: str,
        source_uri: str,
        path: str,
        doc_id: str,
        acl: list[str],
        valid_until: datetime | None = None,
        submitted_by: str | None = None,
    ) -> IngestJob: ...

    def save_job(self, job: IngestJob) -> None: ...

    def advance(self, job: IngestJob, state: JobState, **fields: object) -> IngestJob: ...

    def fail(self, job: IngestJob, code: ErrorCode, stage: str, message: str) -> IngestJob: ...

    def job(self, job_id: str) -> IngestJob | None: ...

    def jobs(
        self,
        tenant: str | None = None,
        states: list[JobState] | None = None,
        limit: int = 1000,
        offset: int = 0,
    ) -> list[IngestJob]: ...

    def delete_jobs(self, tenant: str, doc_id: str) -> int: ...

    def unfinished_jobs(self) -> list[IngestJob]: ...

    # claims: which worker runs a job, so that two workers on one catalog never run the same one
    def claim_job(self, worker: str, lease_s: float, job_id: str | None = None) -> IngestJob | None:
        """Atomically claim ``job_id`` (else the oldest claimable job, in
        :meth:`unfinished_jobs` order) for ``worker`` until ``lease_s`` seconds from now, and
        return it. Claimable: not terminal, and unclaimed or its lease expired; a job named by
        id is claimable by the worker holding it too (claiming it again renews the lease).
        None when nothing is claimable: unknown, terminal, or held by a live lease."""
        ...

    def release_job(self, job_id: str, worker: str) -> None:
        """Drop the claim on ``job_id`` if ``worker`` holds it (another's claim stays)."""
        ...

    def renew_claims(self, worker: str, lease_s: float) -> int:
        """Extend every unfinished job ``worker`` holds to ``lease_s`` from now; return how
        many (a bulk run holds thousands: one statement, not one per job)."""
        ...

    def job_claims(self) -> list[tuple[str, str]]:
        """(job id, worker) of every claimed job, live or expired: a restarted worker frees
        the claims of its dead predecessors on the same host without waiting for the lease."""
        ...

    # the audit log of deletes and replacements
    def audit(self, entry: AuditEntry) -> None: ...

    def audit_entries(
        self, tenant: str, doc_id: str | None = None, limit: int = 100, before: int | None = None
    ) -> list[AuditEntry]: ...

    # documents, pages and structure
    def put_document(
        self, document: Document, pages: list[Page], structure: DocumentStructure | None = None
    ) -> list[str]: ...

    def delete_document(self, tenant: str, doc_id: str) -> list[str] | None: ...

    def document(self, tenant: str, doc_id: str) -> Document | None: ...

    def document_states(self, tenant: str, doc_ids: Iterable[str]) -> dict[str, DocumentState]:
        """``{doc_id: state}`` of those of ``doc_ids`` the tenant has a document of (a jobs
        listing shows each job's document state: MISSING when a re-index left it out)."""
        ...

    def documents(self, tenant: str) -> list[Document]: ...

    def tenants(self) -> list[str]:
        """Every tenant with a document (re-indexing rebuilds them all)."""
        ...

    def audit_tenants(self) -> list[str]:
        """Every tenant with an audit entry (a rollback looks for deletes in each)."""
        ...

    def pages(self, tenant: str, doc_id: str) -> list[Page]: ...

    def page(self, tenant: str, doc_id: str, page_number: int) -> Page | None:
        """One page, without reading the document's others (the page-image route)."""
        ...

    def structure(self, document: Document) -> DocumentStructure: ...


class StructureSource(Protocol):
    """Documents' structure (page labels, sections, numbered items) for the query side:
    reference resolution and section search read it. Returns None for a document ``access``
    may not see, exactly as for one that does not exist."""

    def structure_of(self, access: AccessFilter, doc_id: str) -> DocumentStructure | None: ...


class TraceRepository(Protocol):
    """Query traces by (tenant, trace id), purged with the documents they name."""

    def put(self, tenant: str, trace: RetrievalTrace, doc_ids: set[str]) -> None: ...

    def get(self, tenant: str, trace_id: str) -> tuple[RetrievalTrace, set[str]] | None: ...

    def purge_document(self, tenant: str, doc_id: str) -> int: ...

    def expire(self) -> int: ...

    def close(self) -> None: ...
