"""``pagesight bulk`` on Ray Data: wiring only (the stages are ``pagesight.ingestion.bulk``'s
classes).

The same code runs on one machine (a local Ray started for the run) and in a KubeRay RayJob
(``PAGESIGHT_BULK__RAY_ADDRESS=auto``, see ``k8s/rayjob-bulk.yaml``)::

    rows (one per file, planned by the driver)
      -> ParseStage      CPU tasks, each file in its own child process with its limits
      -> TextEmbedStage  actor pool (the model loads once per actor)
      -> PageEmbedStage  actor pool on GPUs (only with a page model configured)
      -> BulkWriter      the driver: catalog states + batched upserts

The driver writes because it is the one process allowed to: it holds the embedded index's
lock (or talks to the Qdrant server) and is the catalog's only writer. Ray retries a task
whose worker died and restarts a dead actor (``max_task_retries``); if the pipeline fails
anyway, what was written stays written and a re-run resumes the rest.
"""

from __future__ import annotations

import logging
import os
import sys
import warnings
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from pagesight.core.errors import ErrorCode, PageSightError, Stage
from pagesight.core.settings import Settings
from pagesight.ingestion.bulk import (
    DOC_COLUMN,
    STAGES,
    BulkPlanner,
    BulkProgress,
    BulkReport,
    BulkTask,
    BulkWriter,
    InFlight,
    PageEmbedStage,
    ParseStage,
    StageStats,
    TextEmbedStage,
    list_sources,
    task_rows,
)
from pagesight.ingestion.claims import held_claims, new_worker_id, release_dead_local_claims
from pagesight.ingestion.page_count import PageCounter

if TYPE_CHECKING:
    import ray.data

    from pagesight.services.stack import LocalStack

log = logging.getLogger(__name__)

#: Most blocks the input is split into: a block is parsed by one task, file after file.
_MAX_BLOCKS = 10_000


def open_bulk_stack(settings: Settings) -> LocalStack:
    """The index and catalog the run writes to. The embedded index has one writer: while
    ``pagesight serve`` (or another command) holds it, bulk is refused with the reason (the
    same lock ``ingest`` meets; ``ingest`` can go through the server instead, bulk cannot)."""
    from pagesight.services.stack import LocalStack

    try:
        return LocalStack(settings)
    except PageSightError as exc:
        if exc.code == ErrorCode.INDEX_FAILED and "open in another process" in exc.message:
            raise PageSightError(
                ErrorCode.CONFLICT,
                Stage.INDEX,
                f"bulk writes the index itself, and {exc.message.split(' (')[0]}: stop "
                "`pagesight serve` first (or ingest through it: `pagesight ingest --server`), "
                "or run bulk against a Qdrant server (PAGESIGHT_QDRANT_URL)",
            ) from exc
        raise


def run_bulk(
    settings: Settings,
    source: str,
    *,
    tenant: str = "default",
    acl: list[str] | None = None,
    actor: str | None = None,
    on_progress: Callable[[BulkProgress], None] | None = None,
    verbose: bool = False,
) -> BulkReport:
    """List, plan, run the pipeline and write; return the report (never raises for a file).

    ``on_progress`` hears of the plan (phase ``planned``) before Ray starts, then of the start
    and of every finished file; the pages ahead are counted beside the run (into the same
    :class:`BulkProgress`, which a reporter may read at any time). ``verbose``: Ray's own
    output too (:func:`start_ray`)."""
    progress = BulkProgress(files_total=0)  # its clock times the whole run
    items = list_sources(source, settings.bulk, tenant, acl)
    worker, lease_s = new_worker_id(), settings.database.job_lease_s
    with open_bulk_stack(settings) as stack, held_claims(stack.catalog, worker, lease_s):
        release_dead_local_claims(stack.catalog, worker)  # a killed run's, on this host
        planner = BulkPlanner(
            stack.catalog, stack.ingestor.writer, actor, worker=worker, lease_s=lease_s
        )
        plan = planner.plan(items)
        if plan.held:
            log.warning(
                "%d document(s) are being ingested by another worker, left to it: %s",
                len(plan.held),
                ", ".join(plan.held[:5]) + (" ..." if len(plan.held) > 5 else ""),
            )
        skipped = len(plan.skipped) + len(plan.held)  # done, or another worker's to do
        report = BulkReport(
            source=source,
            files=len(items),
            stages={name: StageStats(workers=1) for name in STAGES},
            jobs=list(plan.failed),
            skipped=skipped,
        )
        progress.files_total, progress.to_do = len(items), len(plan.tasks)
        progress.files_done = len(plan.failed) + skipped
        progress.failed, progress.skipped, progress.held = len(plan.failed), skipped, len(plan.held)
        _tell(on_progress, progress)  # the plan, before anything starts
        if not plan.tasks:
            report.wall_s = progress.finish()
            _tell(on_progress, progress)
            return report
        writer = BulkWriter(
            stack.catalog, stack.ingestor.writer, settings.bulk, report, progress, on_progress
        )
        visual = stack.page_store is not None
        if not visual:
            del report.stages["page_embed"]
        progress.phase = "starting"
        _tell(on_progress, progress)
        with count_pages_of(plan.tasks, progress, settings):
            try:
                start_ray(settings, verbose=verbose)
                dataset = build_pipeline(plan.tasks, settings, visual, report)
                progress.phase = "running"
                try:
                    writer.consume(_documents(dataset))
                except Exception as exc:  # the pipeline gave up (retries spent): resumable
                    log.error("the bulk pipeline stopped: %s", exc)
                    writer.flush()
                    report.aborted = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
            finally:
                stop_ray()
                report.wall_s = progress.finish()
    _tell(on_progress, progress)
    return report


def _tell(on_progress: Callable[[BulkProgress], None] | None, progress: BulkProgress) -> None:
    if on_progress is not None:
        on_progress(progress.tick())


def count_pages_of(
    tasks: list[BulkTask], progress: BulkProgress, settings: Settings
) -> PageCounter:
    """Counts the tasks' pages into ``progress`` (``pages_counted``, ``files_counted``) beside
    the run, in a child process (:mod:`pagesight.ingestion.page_count`); a context manager."""

    def counted(pages: int | None) -> None:
        progress.pages_counted += pages or 0
        progress.files_counted += 1

    return PageCounter(
        [t.job.path for t in tasks], counted, memory_mb=settings.limits.parse_memory_mb
    )


def _documents(dataset: ray.data.Dataset) -> Iterator[InFlight]:
    for row in dataset.iter_rows():
        yield InFlight.loads(bytes(row[DOC_COLUMN]))


def start_ray(settings: Settings, *, verbose: bool = False) -> None:
    """Connect to ``bulk.ray_address``, or start a Ray for this run only (``address='local'``:
    never join a cluster some other process left running on this machine).

    Ray's own output is not the run's progress: unless ``verbose`` (or ``PAGESIGHT_DEBUG``),
    workers' lines are not forwarded (``log_to_driver``), Ray Data draws no progress bars and
    logs errors only, and Ray's Python loggers write to file descriptor 2 directly instead of
    ``sys.stderr`` -- which the CLI points at a log file for the run while its own
    ``sys.stderr`` stays the terminal (see :mod:`pagesight.entrypoints.cli_progress`), as it
    does with the lines Ray's C++ core writes there."""
    import ray
    from ray.data import DataContext

    verbose = verbose or bool(os.environ.get("PAGESIGHT_DEBUG"))
    if not verbose:  # before ray.init, which logs too
        _ray_logs_to_fd2()
    options = settings.bulk
    if options.ray_address:
        ray.init(address=options.ray_address, configure_logging=False, log_to_driver=verbose)
    else:
        ray.init(
            address="local",
            num_cpus=options.num_cpus,
            object_store_memory=options.object_store_mb * 1024 * 1024,
            include_dashboard=False,
            configure_logging=False,
            log_to_driver=verbose,
        )
    if not verbose:  # ray.init cleared the ray logger's handlers
        _ray_logs_to_fd2()
    context = DataContext.get_current()
    context.enable_progress_bars = verbose  # ours is the progress the user sees
    context.max_errored_blocks = 0  # a lost block is a failed run (resumable), never silent
    if not verbose:  # Ray Data's INFO lines would mix with ours
        logging.getLogger("ray.data").setLevel(logging.ERROR)
        warnings.filterwarnings("ignore", "The maximum number of concurrent tasks", UserWarning)


#: Ray's console log handlers muted by :func:`_ray_logs_to_fd2`, with their levels, the
#: handlers put in their place, and the logging module's last resort it replaced
_MUTED: list[tuple[logging.Handler, int]] = []
_ADDED: list[tuple[logging.Logger, logging.Handler]] = []
_LAST_RESORT: list[logging.Handler | None] = []


def _ray_logs_to_fd2() -> None:
    """Ray's console handlers write to whatever ``sys.stderr`` is at the time; for the run, its
    loggers write to the process' file descriptor 2 instead (``sys.__stderr__``). Called before
    ``ray.init`` and after it: with ``configure_logging=False`` it clears the ``ray`` logger's
    handlers, and what it logs then reaches the logging module's last resort, which is pointed
    at descriptor 2 as well."""
    if sys.__stderr__ is None:
        return
    if not _LAST_RESORT:
        _LAST_RESORT.append(logging.lastResort)
        logging.lastResort = _fd2_handler(logging.WARNING)
    for name in ("ray", "ray.data"):
        logger = logging.getLogger(name)
        if any(added in logger.handlers for _, added in _ADDED):
            continue
        for handler in logger.handlers:
            if isinstance(handler, logging.StreamHandler) and not isinstance(
                handler, logging.FileHandler
            ):
                _MUTED.append((handler, handler.level))
                handler.setLevel(logging.CRITICAL + 1)
        fd2 = _fd2_handler(logging.NOTSET)
        logger.addHandler(fd2)
        _ADDED.append((logger, fd2))


def _fd2_handler(level: int) -> logging.Handler:
    handler = logging.StreamHandler(sys.__stderr__)
    handler.setLevel(level)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    return handler


def _ray_logs_back() -> None:
    while _MUTED:
        handler, level = _MUTED.pop()
        handler.setLevel(level)
    while _ADDED:
        logger, added = _ADDED.pop()
        logger.removeHandler(added)
    if _LAST_RESORT:
        logging.lastResort = _LAST_RESORT.pop()


def stop_ray() -> None:
    import ray

    try:
        if ray.is_initialized():
            ray.shutdown()
    finally:
        _ray_logs_back()


def build_pipeline(
    tasks: list[BulkTask], settings: Settings, visual: bool, report: BulkReport
) -> ray.data.Dataset:
    """The Ray Data plan over ``tasks``; records each stage's worker count in ``report``."""
    import ray
    import ray.data
    from ray.util.annotations import RayDeprecationWarning

    options = settings.bulk
    retries = options.max_task_retries
    actor_retries: dict[str, Any] = {"max_restarts": retries, "max_task_retries": retries}
    cpus = float(ray.cluster_resources().get("CPU", 1.0))
    parse_workers = options.parse_concurrency or max(1, int(cpus // options.parse_cpus))
    report.stages["parse"].workers = parse_workers
    report.stages["text_embed"].workers = options.text_embed_actors

    rows = task_rows(tasks)
    # Retries go as remote args: Ray 2.60 deprecates them with no named replacement for
    # max_retries / max_restarts yet (revisit before Ray 2.64).
    warnings.filterwarnings("ignore", "`ray_remote_args` is deprecated", RayDeprecationWarning)
    # Any: Ray's stubs do not accept a UDF that takes fn_kwargs
    dataset: Any = ray.data.from_items(rows, override_num_blocks=min(len(rows), _MAX_BLOCKS))
    dataset = dataset.map_batches(
        parse_batch,
        fn_kwargs={"settings": settings},
        batch_size=1,
        compute=ray.data.TaskPoolStrategy(size=parse_workers),
        num_cpus=options.parse_cpus,
        max_retries=retries,
        retry_exceptions=False,
    )
    dataset = dataset.map_batches(
        TextEmbedStage,
        fn_constructor_kwargs={"settings": settings},
        batch_size=options.text_embed_batch_docs,
        compute=ray.data.ActorPoolStrategy(size=options.text_embed_actors),
        num_cpus=options.text_embed_cpus,
        **actor_retries,
    )
    if visual:
        report.stages["page_embed"].workers = options.page_embed_actors
        dataset = dataset.map_batches(
            PageEmbedStage,
            fn_constructor_kwargs={"settings": settings},
            batch_size=options.page_embed_batch_docs,
            compute=ray.data.ActorPoolStrategy(size=options.page_embed_actors),
            **_page_resources(settings),
            **actor_retries,
        )
    return dataset


def parse_batch(batch: dict[str, Any], settings: Settings) -> dict[str, list[bytes]]:
    """The parse stage as a Ray task (a function: Ray Data runs classes only as actors, and
    parsing holds nothing worth keeping between files)."""
    return ParseStage(settings)(batch)


def _page_resources(settings: Settings) -> dict[str, Any]:
    """A GPU share per page embedder actor where Ray has GPUs, else CPUs."""
    import ray

    if ray.cluster_resources().get("GPU", 0) > 0 and settings.visual.device != "cpu":
        return {"num_gpus": settings.bulk.page_embed_gpus}
    return {"num_cpus": settings.bulk.page_embed_cpus}
