"""Tiny models built offline from configs, with the real loading code: ColQwen2
(:mod:`~pagesight.models.testing.tiny_colqwen`), Qwen2 and Qwen2-VL chat models for a vLLM
server on CPU (:mod:`~pagesight.models.testing.tiny_qwen2`,
:mod:`~pagesight.models.testing.tiny_qwen2_vl`) and a cross-encoder
(:mod:`~pagesight.models.testing.tiny_reranker`). For tests and trials without weights: no
production path imports them."""
