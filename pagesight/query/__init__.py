"""The query engine, plain Python: no HTTP, no Ray (a test checks the imports).

One module per step of the query flow (DESIGN.md section 1):

- :mod:`pagesight.query.routing`: which route a query takes (``auto`` picks one);
- :mod:`pagesight.query.retrieval`: candidate search over the index, page hits; the routes it
  fuses (dense, BM25, visual, page, and those that follow the document's structure) are a
  registry in :mod:`pagesight.query.routes`;
- :mod:`pagesight.query.fusion`: weighted reciprocal-rank fusion of the routes;
- :mod:`pagesight.query.evidence`: the boxes on a page that matched;
- :mod:`pagesight.query.visual_rerank`: exact ColQwen2 MaxSim over the candidates' pages;
- :mod:`pagesight.query.passages`: the answer step's candidate search (pages -> passages with text);
- :mod:`pagesight.query.answer`: the answer pipeline: rerank, abstain, grounded generation; the
  citations it builds and checks in :mod:`pagesight.query.citations`, the answers without an
  LLM in :mod:`pagesight.query.extractive_answer` (lead, supporting quotes, related passages);
- :mod:`pagesight.query.corrective`: corrective retrieval (CRAG) wrapping a candidate search, with
  its graders in :mod:`pagesight.query.grading`.

The gateway (HTTP) and the services (Ray) call in; nothing here calls out to them.
"""
