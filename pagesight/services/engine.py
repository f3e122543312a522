"""The query engine, assembled once from settings: the one builder the index service, the
command line and ``bench/`` use (so a new step is wired in one place).

:func:`build_answer_pipeline` takes an open :class:`pagesight.services.stack.LocalStack` (index,
models, retriever) and returns the answer pipeline over it: passage search, ranker, the visual
rerank when a page model is configured, the LLM when ``PAGESIGHT_LLM__BASE_URL`` is set (else
extractive answers) with the stored page images for ``PAGESIGHT_LLM__VISION``, and corrective
retrieval when enabled.
"""

from __future__ import annotations

from pagesight.core.settings import Settings
from pagesight.models.llm import OpenAiChatClient
from pagesight.models.reranker import build_ranker
from pagesight.query.answer import AnswerPipeline
from pagesight.query.corrective import build_corrective, pipeline_scorer
from pagesight.query.passages import PassageSearch
from pagesight.query.routes import counter_of
from pagesight.query.visual_rerank import VisualPageReranker
from pagesight.services.page_images import StoredPageImages
from pagesight.services.stack import LocalStack


def build_answer_pipeline(settings: Settings, stack: LocalStack) -> AnswerPipeline:
    """The answer pipeline over ``stack`` (cheap: models load on first use or in warm-ups)."""
    llm = OpenAiChatClient(settings.llm) if settings.llm.base_url else None
    visual = None
    if stack.page_store is not None and stack.page_embedder is not None:
        # exact MaxSim of the candidates' pages, computed by the index over those ids
        visual = VisualPageReranker(stack.page_store, stack.page_embedder, scoring="index")
    passages = PassageSearch(stack.multistep, stack.store)  # route agentic included
    pipeline = AnswerPipeline(
        passages,
        build_ranker(settings.reranker),
        llm,
        settings.answer,
        visual=visual,
        vision=settings.llm.vision,
        images=StoredPageImages(stack.catalog, stack.ingestor.images),
        counter=counter_of(stack.retriever.routes),  # structure counts ("how many figures")
    )
    if settings.answer.corrective.enabled:
        pipeline.corrective = build_corrective(
            passages,
            settings.answer.corrective,
            llm=llm,
            visual_available=stack.retriever.visual_available,
            scorer=pipeline_scorer(pipeline),  # bands on the pipeline's confidence
        )
    return pipeline
