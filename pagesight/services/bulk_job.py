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
import time
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
) -> BulkReport:
    """List, plan, run the pipeline and write; return the report (never raises for a file)."""
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
        progress = BulkProgress(
            files_total=len(items),
            files_done=len(plan.failed) + skipped,
            failed=len(plan.failed),
            skipped=skipped,
        )
        if on_progress is not None:
            on_progress(progress)
        if not plan.tasks:
            return report
        writer = BulkWriter(
            stack.catalog, stack.ingestor.writer, settings.bulk, report, progress, on_progress
        )
        visual = stack.page_store is not None
        if not visual:
            del report.stages["page_embed"]
        start_ray(settings)
        started = time.perf_counter()
        try:
            dataset = build_pipeline(plan.tasks, settings, visual, report)
            try:
                writer.consume(_documents(dataset))
            except Exception as exc:  # the pipeline gave up (retries spent): resumable
                log.error("the bulk pipeline stopped: %s", exc)
                writer.flush()
                report.aborted = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
        finally:
            report.wall_s = time.perf_counter() - started
            stop_ray()
    return report


def _documents(dataset: ray.data.Dataset) -> Iterator[InFlight]:
    for row in dataset.iter_rows():
        yield InFlight.loads(bytes(row[DOC_COLUMN]))


def start_ray(settings: Settings) -> None:
    """Connect to ``bulk.ray_address``, or start a Ray for this run only (``address='local'``:
    never join a cluster some other process left running on this machine)."""
    import ray
    from ray.data import DataContext

    options = settings.bulk
    if options.ray_address:
        ray.init(address=options.ray_address, configure_logging=False, log_to_driver=False)
    else:
        ray.init(
            address="local",
            num_cpus=options.num_cpus,
            object_store_memory=options.object_store_mb * 1024 * 1024,
            include_dashboard=False,
            configure_logging=False,
            log_to_driver=False,
        )
    if not os.environ.get("PAGESIGHT_DEBUG"):  # Ray Data's INFO lines would mix with ours
        logging.getLogger("ray.data").setLevel(logging.ERROR)
        warnings.filterwarnings("ignore", "The maximum number of concurrent tasks", UserWarning)
    context = DataContext.get_current()
    context.enable_progress_bars = False  # ours is the progress the user sees
    context.max_errored_blocks = 0  # a lost block is a failed run (resumable), never silent


def stop_ray() -> None:
    import ray

    if ray.is_initialized():
        ray.shutdown()


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
