"""``pagesight reindex`` and ``pagesight rollback``: wiring only (the steps are
``pagesight.ingestion.reindex``'s classes; the pipeline is ``pagesight.services.bulk_job``'s).

Neither command opens the live index version: a re-index writes a version of its own (its own
directory and lock on the embedded engine) and switches the alias; rollback switches it back.
So neither fights a searcher for the live version's lock: a process holding the index through
:class:`pagesight.index.live.LiveStore` (the index service, ``pagesight serve``, another command)
keeps answering on the version it has open and switches to the promoted one within
``index.alias_check_s``, closing the old one when its last call ends. Tested: a search loop in
the same process as the re-index (``tests/integration/test_reindex.py``), and the command run as
a separate process against a data directory no server holds. Promote and rollback write the
catalog (SQLite, safe across processes) from this process.

A searcher picks up a version only when its schema is the one the searcher was configured with:
after a change of embedding model or dims, restart the server with the new settings (until then
it keeps serving the previous version; nothing fails).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from pagesight.core.errors import ErrorCode, PageSightError, Stage
from pagesight.core.protocols import CatalogRepository
from pagesight.core.settings import Settings
from pagesight.index.base import IndexSchema, VectorStore
from pagesight.index.factory import (
    VERSION_FORMAT,
    CollectionManager,
    alias_name,
    collection_manager,
    index_backend,
)
from pagesight.index.vectors import CHUNK_COLLECTION, PAGE_COLLECTION, PAGE_VECTOR
from pagesight.ingestion.bulk import (
    DOC_COLUMN,
    STAGES,
    BulkProgress,
    BulkReport,
    BulkTask,
    InFlight,
    PageEmbedStage,
    ParseStage,
    StageStats,
    TextEmbedStage,
)
from pagesight.ingestion.reindex import (
    CatalogSnapshot,
    DocKey,
    IndexVersions,
    ReindexPlan,
    ReindexPlanner,
    ReindexReport,
    VersionWriter,
    verify,
    write_rows,
)
from pagesight.store.catalog import open_catalog

log = logging.getLogger(__name__)

#: audit entries read at a time when looking for deletes since a version
_AUDIT_PAGE = 500


def target_schemas(settings: Settings) -> dict[str, tuple[str, IndexSchema]]:
    """``{"text": (alias, schema), "pages": ...}``: what the configured models build (the
    same schemas :class:`pagesight.services.stack.LocalStack` opens the live versions with)."""
    from pagesight.ingestion.ingest import FIRST_STAGE_POOLING
    from pagesight.models.sparse import Bm25Encoder
    from pagesight.models.text_embedder import SentenceTransformerEmbedder
    from pagesight.services.stack import chunk_schema

    text = chunk_schema(
        SentenceTransformerEmbedder(settings.embedder), Bm25Encoder(settings.sparse)
    )
    found = {"text": (alias_name(settings, CHUNK_COLLECTION), text)}
    if settings.visual.active:
        from pagesight.models.colqwen import ColQwen2Embedder

        pages = ColQwen2Embedder(settings.visual)
        found["pages"] = (
            alias_name(settings, PAGE_COLLECTION),
            IndexSchema.for_pages(
                name=PAGE_VECTOR,
                dim=pages.dim,
                model_id=pages.model_id,
                pooling=FIRST_STAGE_POOLING,
            ),
        )
    return found


def create_collections(settings: Settings) -> dict[str, str]:
    """On a Qdrant server: the live version of every index the configured models need, created
    and promoted now if it does not exist yet; ``{index: live version}``. ``pagesight db
    upgrade`` (the migrate Job) calls it, so that replicas starting together find the
    collections and never race to create a first version each. The embedded index is left to
    its one owner (the process that serves it creates it on first open): ``{}``."""
    if index_backend(settings) != "qdrant":
        return {}
    manager = collection_manager(settings)
    try:
        live: dict[str, str] = {}
        for index, (alias, schema) in target_schemas(settings).items():
            manager.open_store(alias, schema, create=True).close()
            version = manager.live_version(alias)
            assert version is not None
            live[index] = version
        return live
    finally:
        manager.close()


def run_reindex(
    settings: Settings,
    *,
    allow_missing: bool | None = None,
    on_progress: Callable[[BulkProgress], None] | None = None,
    verbose: bool = False,
) -> ReindexReport:
    """Plan, build a new version, verify, promote (``pagesight.ingestion.reindex``'s module doc). A
    refusal is in the report (``refused``), with the live version and the catalog untouched;
    NOT_FOUND is raised when the catalog has no document at all.

    ``on_progress`` hears of the plan before any work starts (Ray included), then of every
    rebuilt document, as ``pagesight bulk``'s does; ``verbose``: Ray's own output too."""
    if allow_missing is None:
        allow_missing = settings.reindex.allow_missing
    watch = _Watch(BulkProgress(files_total=0, command="reindex"), on_progress, verbose)
    report = ReindexReport()
    catalog = open_catalog(settings)
    manager = collection_manager(settings)
    try:
        tenants = catalog.tenants()
        plan = ReindexPlanner(catalog).plan(tenants)
        report.documents, report.missing = len(plan.documents), plan.missing
        if not plan.documents:
            raise PageSightError(
                ErrorCode.NOT_FOUND,
                Stage.INPUT,
                f"nothing to reindex: the catalog under {settings.data_dir} has no documents",
            )
        watch.planned(plan)
        # a document already MISSING is in no live version: leaving it out again loses nothing
        losing = [m for m in plan.missing if not m.already_missing]
        if losing and not allow_missing:
            report.refused = PageSightError(
                ErrorCode.NOT_FOUND,
                Stage.INPUT,
                f"{len(losing)} of {len(plan.documents)} document(s) cannot be rebuilt "
                "(source file gone or changed since it was indexed: see 'missing'); nothing was "
                "changed. Re-ingest them, or pass --allow-missing to leave them out (they stay "
                "listed as MISSING)",
            )
            return report
        report.left_out = list(plan.missing)
        if not plan.tasks:
            report.refused = PageSightError(
                ErrorCode.NOT_FOUND,
                Stage.INPUT,
                "no document's source file is left to rebuild from: promoting an empty index "
                "was refused",
            )
            return report
        _build_and_promote(settings, manager, catalog, plan, report, tenants, watch)
    finally:
        report.wall_s = watch.progress.finish()
        manager.close()
        catalog.close()
    watch.tell()
    return report


@dataclass
class _Watch:
    """The run's progress and who hears of it (reporting only: nothing here decides)."""

    progress: BulkProgress
    on_progress: Callable[[BulkProgress], None] | None = None
    verbose: bool = False

    def tell(self) -> None:
        if self.on_progress is not None:
            self.on_progress(self.progress.tick())

    def planned(self, plan: ReindexPlan) -> None:
        """The plan event: documents, the missing ones, the ones to rebuild and their pages
        (the catalog knows them: nothing is opened to count)."""
        p = self.progress
        p.files_total, p.missing, p.to_do = len(plan.documents), len(plan.missing), len(plan.tasks)
        p.files_done = len(plan.missing)  # decided: left out, or the run is refused
        p.files_counted = len(plan.tasks)
        p.pages_counted = sum(
            plan.documents[(t.job.tenant, t.job.doc_id)].page_count or 0
            for t in plan.tasks
            if (t.job.tenant, t.job.doc_id) in plan.documents
        )
        self.tell()
        p.phase = "starting"

    def counted(self, documents: Iterator[InFlight]) -> Iterator[InFlight]:
        """``documents``, counted into the progress as they arrive."""
        for doc in documents:
            self.progress.phase = "running"
            self.progress.files_done += 1
            if doc.error is None and doc.parsed is not None:
                self.progress.pages_done += doc.pages
            else:
                self.progress.failed += 1
            self.tell()
            yield doc


def _build_and_promote(
    settings: Settings,
    manager: CollectionManager,
    catalog: CatalogRepository,
    plan: ReindexPlan,
    report: ReindexReport,
    tenants: list[str],
    watch: _Watch,
) -> None:
    """Build the new versions, verify them, then promote (or drop them and refuse)."""
    schemas = target_schemas(settings)
    stores: dict[str, VectorStore] = {}
    try:
        for index, (alias, schema) in schemas.items():
            versions = IndexVersions(name=alias, previous=manager.live_version(alias))
            versions.new, stores[index] = manager.create_version(alias, schema)
            versions.dims = {
                **{n: s.dim for n, s in schema.dense.items()},
                **{n: s.dim for n, s in schema.multivector.items()},
            }
            report.indexes[index] = versions
        writer = VersionWriter(stores["text"], stores.get("pages"), settings.bulk)
        writer.consume(
            watch.counted(_documents(plan.tasks, settings, "pages" in stores, watch.verbose))
        )
        for store in stores.values():
            store.flush()
        report.rebuilt, report.pages, report.failures = (
            len(writer.rebuilt),
            writer.pages,
            writer.failures,
        )
        for index, store in stores.items():
            report.indexes[index].points = store.count()
        catalog_now = {
            (d.tenant, d.doc_id): d for t in catalog.tenants() for d in catalog.documents(t)
        }
        left_out = {(m.tenant, m.doc_id) for m in report.left_out}
        report.mismatches = verify(
            plan,
            writer,
            catalog_now,
            {index: (stores[index], schemas[index][1]) for index in stores},
            left_out,
        )
    except BaseException:
        _close_all(stores)
        _drop_new(manager, report)
        raise
    _close_all(stores)  # the new versions' locks go before any searcher may open them
    if report.mismatches:
        _drop_new(manager, report)
        report.refused = PageSightError(
            ErrorCode.INDEX_FAILED,
            Stage.INDEX,
            f"the new version failed verification ({len(report.mismatches)} problem(s), see "
            "'mismatches'); it was dropped and the live version is unchanged",
        )
        return
    text = report.indexes["text"]
    snapshots = CatalogSnapshot(settings.data_dir / "reindex")
    if text.previous is not None:
        snapshots.save(catalog, tenants, text.name, text.previous)
    for versions in report.indexes.values():
        assert versions.new is not None
        manager.promote(versions.name, versions.new)
    write_rows(catalog, writer.rebuilt, left_out)
    report.promoted = True
    for index, versions in report.indexes.items():
        report.dropped[index] = manager.drop_old(versions.name, keep=settings.index.keep_versions)
        for dropped in report.dropped[index]:
            if index == "text":
                snapshots.path(versions.name, dropped).unlink(missing_ok=True)
    log.info("re-index promoted %s", {k: v.new for k, v in report.indexes.items()})


def _documents(
    tasks: list[BulkTask], settings: Settings, visual: bool, verbose: bool = False
) -> Iterator[InFlight]:
    if settings.reindex.runner == "local":
        yield from _local_documents(tasks, settings, visual)
        return
    from pagesight.services.bulk_job import build_pipeline, start_ray, stop_ray

    bulk_report = BulkReport(
        source="reindex", files=len(tasks), stages={n: StageStats(workers=1) for n in STAGES}
    )
    start_ray(settings, verbose=verbose)
    try:
        dataset = build_pipeline(tasks, settings, visual, bulk_report)
        for row in dataset.iter_rows():
            yield InFlight.loads(bytes(row[DOC_COLUMN]))
    finally:
        stop_ray()


def _local_documents(tasks: list[BulkTask], settings: Settings, visual: bool) -> Iterator[InFlight]:
    """The pipeline's stages, one document at a time in this process (``reindex.runner``)."""
    parse, text = ParseStage(settings), TextEmbedStage(settings)
    pages = PageEmbedStage(settings) if visual else None
    for task in tasks:
        doc = parse.one(InFlight(job=task.job, title=task.title))
        batch: dict[str, Any] = {DOC_COLUMN: [doc.dumps()]}
        batch = text(batch)
        if pages is not None:
            batch = pages(batch)
        yield InFlight.loads(bytes(batch[DOC_COLUMN][0]))


def _close_all(stores: dict[str, VectorStore]) -> None:
    for store in stores.values():
        try:
            store.close()
        except Exception as exc:
            log.warning("closing a new index version failed: %s", exc)


def _drop_new(manager: CollectionManager, report: ReindexReport) -> None:
    """A version that will not go live is deleted: left in place, an unpromoted version newer
    than the live one would become the rollback target after the next promote."""
    for versions in report.indexes.values():
        if versions.new is not None and versions.new != manager.live_version(versions.name):
            try:
                manager.drop_version(versions.name, versions.new)
            except Exception as exc:
                log.warning("could not drop the unpromoted version %s: %s", versions.new, exc)


def rollback(settings: Settings, which: Literal["all", "text", "pages"] = "all") -> dict[str, Any]:
    """Switch the alias of ``which`` index back to its previous version (CollectionManager.
    rollback) and, for the text index, put back the catalog rows saved when that version was
    live. Searchers switch as after a promote. Returns ``{index: {alias, from, to,
    catalog_documents, purged}}``.

    A document deleted while the newer version was live (its audit log says so) is deleted from
    the older version before it goes live again, and not put back in the catalog: a rollback
    never brings back what someone deleted. The older version is not open anywhere at that
    point (a searcher closed it when it switched away), so this process can write it.
    Documents ingested while the newer version was live are not in the older one: re-ingest
    them after a rollback (``pagesight sync`` does it for a folder)."""
    choices = ["text", "pages"] if which == "all" else [which]
    names = {"text": CHUNK_COLLECTION, "pages": PAGE_COLLECTION}
    result: dict[str, Any] = {}
    catalog = open_catalog(settings)
    manager = collection_manager(settings)
    snapshots = CatalogSnapshot(settings.data_dir / "reindex")
    try:
        todo: list[tuple[str, str, str]] = []
        for index in choices:  # every check before the first switch: all or nothing
            alias = alias_name(settings, names[index])
            live = manager.live_version(alias)
            if live is None:
                if which == "all" and index == "pages":
                    continue  # no page index configured: nothing to roll back
                raise PageSightError(
                    ErrorCode.NOT_FOUND, Stage.INDEX, f"no {index} index ({alias!r}) to roll back"
                )
            if not [v for v in manager.versions(alias) if v < live]:
                raise PageSightError(
                    ErrorCode.NOT_FOUND,
                    Stage.INDEX,
                    f"the {index} index ({alias!r}) has no version older than {live} to roll "
                    "back to",
                )
            todo.append((index, alias, live))
        deleted = _deleted_since(catalog, min(live for _, _, live in todo))
        for index, alias, live in todo:
            back = max(v for v in manager.versions(alias) if v < live)
            _purge(manager, alias, back, deleted)
            if index == "text":
                snapshots.save(catalog, catalog.tenants(), alias, live)
            manager.promote(alias, back)
            restored = (
                snapshots.restore(catalog, alias, back, skip=deleted) if index == "text" else None
            )
            result[index] = {
                "alias": alias,
                "from": live,
                "to": back,
                "catalog_documents": restored,
                "purged": sorted(doc_id for _, doc_id in deleted),
            }
    finally:
        manager.close()
        catalog.close()
    return result


def _deleted_since(catalog: CatalogRepository, version_id: str) -> set[DocKey]:
    """Documents whose audit log has a delete after version ``version_id`` was created (ids
    are UTC creation times), newest entries first, a page at a time."""
    since = datetime.strptime(version_id, VERSION_FORMAT).replace(tzinfo=UTC)
    found: set[DocKey] = set()
    for tenant in catalog.audit_tenants():  # a delete always leaves an audit entry
        before: int | None = None
        while True:
            page = catalog.audit_entries(tenant, limit=_AUDIT_PAGE, before=before)
            found |= {(e.tenant, e.doc_id) for e in page if e.action == "delete" and e.at >= since}
            if len(page) < _AUDIT_PAGE or page[-1].at < since:
                break
            before = page[-1].seq
    return found


def _purge(manager: CollectionManager, alias: str, version: str, deleted: set[DocKey]) -> None:
    if not deleted:
        return
    store = manager.open_version(alias, version)
    try:
        for tenant, doc_id in sorted(deleted):
            store.delete_document(tenant, doc_id)
        store.flush()
    finally:
        store.close()
