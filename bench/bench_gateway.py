"""Gateway throughput and latency under concurrent clients, against the same search in-process.

On the smoke corpus (ingested into ``--data-dir`` first, idempotently), ``--clients`` concurrent
clients send ``--requests`` searches in total (route ``text``, top_k 10, the smoke questions in
turn) to ``/v1/search`` of the Ray Serve application started by this script on this machine;
then the same searches with the same concurrency are called in-process on
:class:`pagesight.services.index_service.IndexService` (threads, no HTTP, no Ray) as the baseline,
before and after the served runs (their mean is what the ratios divide by):

- ``rps``, ``p50_ms``, ``p99_ms``, ``errors``: served, as a client sees it;
- ``in_process``: the same for the in-process calls;
- ``overhead_ratio`` = served p50 / in-process p50 (what HTTP, the proxy and the handle hop
  cost on top of the search itself), and ``throughput_ratio`` = served rps / in-process rps.

With ``--query-replicas N`` the read path of the cluster profile is measured too, in the same
run: a throwaway PostgreSQL server (``tests/postgres.py``) gets the smoke installation
(``pagesight db migrate-from-sqlite``), then the application runs with ``read_path: query``
and 1 Query replica, then with N; ``query_scaling`` compares them (rps ratio, p99 ratio) and
each with the index read path above. On the embedded index the Query replicas read through
the index service, so on 2 cores this shows what the split costs, not scaling.

Clients run in this process (asyncio + aiohttp), sharing the machine's cores with the server, as
a sidecar load generator would. The in-process runs never overlap the server's: the embedded
index has a single writer, so each closes it before the next opens it.

    python bench/bench_gateway.py --out var/bench/gateway.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, get_args

import numpy as np

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

if TYPE_CHECKING:
    from pagesight.core.settings import ApiKeyRecord
    from pagesight.entrypoints.serve_app import AppArgs

EVAL = REPO_ROOT.parent / "shared" / "eval"
TENANT = "eval"  # the tenant bench/eval_retrieval.py indexes the corpus under
#: the placement of the query-replica runs: their reads go to the index service's deployment
QUERY_PLACEMENT = "separate"


def smoke_set(eval_dir: Path) -> tuple[list[Path], list[str]]:
    names = json.loads((eval_dir / "subsets.json").read_text())["smoke"]
    questions = [
        json.loads(line)
        for line in (eval_dir / "questions.jsonl").read_text().splitlines()
        if line.strip()
    ]
    return [eval_dir / "pdfs" / n for n in names], [
        q["question"] for q in questions if q["doc"] in names
    ]


def summarise(latencies_s: list[float], wall_s: float, errors: int) -> dict[str, Any]:
    ms = np.array(latencies_s) * 1000
    return {
        "requests": len(latencies_s) + errors,
        "rps": round(len(latencies_s) / wall_s, 1),
        "p50_ms": round(float(np.percentile(ms, 50)), 1),
        "p99_ms": round(float(np.percentile(ms, 99)), 1),
        "mean_ms": round(float(ms.mean()), 1),
        "errors": errors,
        "wall_s": round(wall_s, 2),
    }


def ingest(data_dir: Path, pdfs: list[Path]) -> int:
    from pagesight.core.settings import Settings
    from pagesight.services.stack import LocalStack

    with LocalStack(Settings(data_dir=data_dir)) as stack:
        jobs = stack.ingestor.ingest([stack.request(p, tenant=TENANT) for p in pdfs])
    failed = [j for j in jobs if j.state.value != "READY"]
    if failed:
        raise SystemExit(f"{len(failed)} smoke documents failed to ingest: {failed[0]}")
    return sum(j.pages for j in jobs)


def run_in_process(
    data_dir: Path, questions: list[str], requests: int, clients: int
) -> dict[str, Any]:
    from pagesight.api.caller import Caller
    from pagesight.api.models import SearchRequest
    from pagesight.core.settings import Settings
    from pagesight.core.types import RouteName
    from pagesight.services.index_service import IndexService

    service = IndexService(Settings(data_dir=data_dir))
    service.warm_up()
    caller = Caller(key_id="bench", tenant=TENANT)
    try:
        for q in questions[:5]:  # warm-up
            service.search(caller, SearchRequest(query=q, route=RouteName.TEXT), "warm")

        def one(i: int) -> float:
            body = SearchRequest(
                query=questions[i % len(questions)], route=RouteName.TEXT, top_k=10
            )
            started = time.perf_counter()
            service.search(caller, body, f"bench-{i}")
            return time.perf_counter() - started

        started = time.perf_counter()
        with ThreadPoolExecutor(clients) as pool:
            latencies = list(pool.map(one, range(requests)))
        return summarise(latencies, time.perf_counter() - started, 0)
    finally:
        service.close()


async def _load(
    url: str, key: str, questions: list[str], requests: int, clients: int
) -> tuple[list[float], int, float, dict[int, int], float]:
    """The served run's clients: latencies, errors, wall time, statuses and the CPU seconds the
    clients themselves took (``time.process_time``: the server runs in Ray's processes).

    aiohttp, not httpx: on this machine an httpx request cost its client ~1.2 ms of CPU, an
    aiohttp one ~0.1 ms (the same 16 clients against a static ASGI app), and the clients share
    the server's two cores; a load generator should not be what the gateway is measured by."""
    import aiohttp

    latencies: list[float] = []
    statuses: dict[int, int] = {}
    errors = 0
    counter = iter(range(requests))
    headers = {"Authorization": f"Bearer {key}"}
    connector = aiohttp.TCPConnector(limit=clients)
    timeout = aiohttp.ClientTimeout(total=60)
    async with aiohttp.ClientSession(
        url, headers=headers, connector=connector, timeout=timeout
    ) as client:

        async def post(body: dict[str, Any]) -> int:
            async with client.post("/v1/search", json=body) as response:
                await response.read()
                return response.status

        async def worker() -> None:
            nonlocal errors
            for i in counter:
                body = {"query": questions[i % len(questions)], "route": "text", "top_k": 10}
                started = time.perf_counter()
                try:
                    status = await post(body)
                except (aiohttp.ClientError, TimeoutError):
                    status = -1
                statuses[status] = statuses.get(status, 0) + 1
                if status == 200:
                    latencies.append(time.perf_counter() - started)
                else:
                    errors += 1

        for q in questions[:5]:  # warm-up: first requests build connections and routers
            await post({"query": q, "route": "text"})
        cpu_started = time.process_time()
        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(clients)))
        wall = time.perf_counter() - started
        client_cpu_s = time.process_time() - cpu_started
    return latencies, errors, wall, statuses, client_cpu_s


def app_args(
    data_dir: Path,
    record: ApiKeyRecord,
    clients: int,
    gateway_replicas: int,
    placement: str,
    query_replicas: int = 0,
    database_url: str | None = None,
) -> AppArgs:
    """The Serve application's arguments for a served run (validated here, before Ray):
    ``query_replicas`` > 0 runs reads in that many Query replicas (``database_url`` needed)."""
    from pagesight.entrypoints.serve_app import AppArgs, DeploymentResources

    settings: dict[str, Any] = {
        "data_dir": str(data_dir),
        "gateway": {"api_keys": [record.model_dump()], "max_concurrency_per_key": clients * 2},
    }
    if database_url is not None:
        settings["database_url"] = database_url
    args = AppArgs.model_validate(
        {
            "settings": settings,
            "gateway": DeploymentResources(num_cpus=0.25, replicas=gateway_replicas),
            "index_placement": placement,
            "read_path": "query" if query_replicas else "index",
            # two cores' worth of shares: the index service gives up what the replicas take
            "query": DeploymentResources(num_cpus=0.25, replicas=max(query_replicas, 1)),
        }
    )
    args.check(args.resolved_settings())
    return args


def placements() -> tuple[list[str], str]:
    """``AppArgs.index_placement``'s values and default: the choices of ``--index-placement``."""
    from pagesight.entrypoints.serve_app import AppArgs

    field = AppArgs.model_fields["index_placement"]
    return [str(v) for v in get_args(field.annotation)], str(field.default)


def run_served(  # noqa: PLR0913  # one served run's whole configuration
    data_dir: Path,
    questions: list[str],
    requests: int,
    clients: int,
    gateway_replicas: int,
    placement: str,
    query_replicas: int = 0,
    database_url: str | None = None,
    ingress: str = "proxy",
) -> dict[str, Any]:
    from pagesight.entrypoints.serve_app import run_local, shutdown_local
    from pagesight.gateway.auth import new_key
    from tests.asgi_server import free_ports

    key, record = new_key("bench", TENANT)
    port = free_ports(gateway_replicas + 1)  # the gateway replicas', then the proxy's
    args = app_args(
        data_dir, record, clients, gateway_replicas, placement, query_replicas, database_url
    )
    started = time.perf_counter()
    try:
        run_local(
            args,
            host="127.0.0.1",
            port=port,
            num_cpus=os.cpu_count(),
            object_store_mb=100,
            timeout_s=300,
            log_to_driver=False,
            ingress=ingress,
        )
        startup_s = time.perf_counter() - started
        latencies, errors, wall, statuses, client_cpu_s = asyncio.run(
            _load(f"http://127.0.0.1:{port}", key, questions, requests, clients)
        )
    finally:
        shutdown_local()
    result = summarise(latencies, wall, errors)
    result["statuses"] = {str(k): v for k, v in sorted(statuses.items())}
    result["client_cpu_ms_per_request"] = round(client_cpu_s * 1000 / max(requests, 1), 2)
    result["startup_s"] = round(startup_s, 1)
    return result


def query_scaling(
    args: argparse.Namespace, questions: list[str], index_path: dict[str, Any]
) -> dict[str, Any]:
    """The Query deployment with 1 replica, then with ``args.query_replicas``, on a throwaway
    PostgreSQL that holds the smoke installation's catalog; ratios of the second to the first
    (and to the index read path, ``index_path``)."""
    from pagesight.core.settings import Settings
    from pagesight.services.db_migrate import database, migrate_from_sqlite
    from tests.postgres import running_postgres

    with running_postgres() as server:
        url = server.url(server.new_database())
        with database(Settings(database_url=url)) as db:  # what `pagesight db` connects with
            migrate_from_sqlite(args.data_dir, db)
        runs = {}
        for replicas in (1, args.query_replicas):
            runs[replicas] = run_served(
                args.data_dir,
                questions,
                args.requests,
                args.clients,
                args.gateway_replicas,
                QUERY_PLACEMENT,
                query_replicas=replicas,
                database_url=url,
                ingress=args.ingress[0],
            )
            print(f"query x{replicas}:  {runs[replicas]}", flush=True)
    one, many = runs[1], runs[args.query_replicas]
    rps_ratio = round(many["rps"] / one["rps"], 2)
    p99_ratio = round(many["p99_ms"] / one["p99_ms"], 2)
    return {
        "replicas": args.query_replicas,
        "rps_ratio": rps_ratio,
        "p99_ratio": p99_ratio,
        "rps_ratio_vs_index_path": round(many["rps"] / index_path["rps"], 2),
        "p99_ratio_vs_index_path": round(many["p99_ms"] / index_path["p99_ms"], 2),
        "targets": {
            "rps_ratio>=0.9": rps_ratio >= 0.9,
            "p99_no_worse": p99_ratio <= 1.0,
            "errors==0": one["errors"] == 0 and many["errors"] == 0,
        },
        "one_replica": one,
        "replicas_run": many,
    }


def mean_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The baseline of the ratios: the mean of the in-process runs before and after serving."""
    keys = ("rps", "p50_ms", "p99_ms", "mean_ms")
    mean = {k: round(sum(r[k] for r in runs) / len(runs), 1) for k in keys}
    return {**mean, "errors": sum(r["errors"] for r in runs), "runs": len(runs)}


def ratios(served: dict[str, Any], baseline: dict[str, Any]) -> dict[str, float]:
    """Served against in-process, same run: p50 (``overhead_ratio``), p99 and req/s."""
    return {
        "overhead_ratio": round(served["p50_ms"] / baseline["p50_ms"], 2),
        "p99_ratio": round(served["p99_ms"] / baseline["p99_ms"], 2),
        "throughput_ratio": round(served["rps"] / baseline["rps"], 2),
    }


def targets(served: dict[str, Any], baseline: dict[str, Any]) -> dict[str, bool]:
    """Issue 33's: served keeps 90 % of the in-process throughput and p99 within 1.2x, with
    no errors; on this 2-core machine at least 60 req/s at p99 <= 300 ms."""
    measured = ratios(served, baseline)
    return {
        "throughput_ratio>=0.9": measured["throughput_ratio"] >= 0.9,
        "p99_ratio<=1.2": measured["p99_ratio"] <= 1.2,
        "errors==0": served["errors"] == 0,
        "rps>=60": served["rps"] >= 60,
        "p99_ms<=300": served["p99_ms"] <= 300,
    }


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--eval-dir", type=Path, default=EVAL)
    ap.add_argument("--data-dir", type=Path, default=REPO_ROOT / "var" / "eval" / "smoke")
    ap.add_argument("--requests", type=int, default=600)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--gateway-replicas", type=int, default=1)
    choices, default = placements()
    ap.add_argument("--index-placement", choices=choices, default=default)
    ap.add_argument(
        "--ingress",
        type=lambda v: [x.strip() for x in v.split(",") if x.strip()],
        default=["direct", "proxy"],
        help="served runs, comma-separated, the first is the headline: direct (the gateway "
        "replica serves HTTP) and/or proxy (Serve's HTTP proxy in front)",
    )
    ap.add_argument(
        "--query-replicas",
        type=int,
        default=0,
        help="also measure read_path query with 1 and with this many Query replicas (PostgreSQL)",
    )
    ap.add_argument("--out", type=Path, required=True)
    return ap


def main() -> None:
    args = parser().parse_args()
    unknown = set(args.ingress) - {"direct", "proxy"}
    if unknown or not args.ingress:
        raise SystemExit(f"--ingress takes direct and/or proxy, got {args.ingress}")
    from pagesight.gateway.auth import new_key

    # the application's arguments are checked before minutes of ingestion and searches
    app_args(
        args.data_dir,
        new_key("bench", TENANT)[1],
        args.clients,
        args.gateway_replicas,
        args.index_placement,
    )

    pdfs, questions = smoke_set(args.eval_dir)
    pages = ingest(args.data_dir, pdfs)
    print(f"smoke corpus: {len(pdfs)} PDFs, {len(questions)} questions", flush=True)
    in_process = [run_in_process(args.data_dir, questions, args.requests, args.clients)]
    print(f"in-process: {in_process[0]}", flush=True)
    by_ingress = {}
    for ingress in args.ingress:
        by_ingress[ingress] = run_served(
            args.data_dir,
            questions,
            args.requests,
            args.clients,
            args.gateway_replicas,
            args.index_placement,
            ingress=ingress,
        )
        print(f"served ({ingress}): {by_ingress[ingress]}", flush=True)
    # once more after the served runs: on a shared machine one in-process run varied by +-12 %
    in_process.append(run_in_process(args.data_dir, questions, args.requests, args.clients))
    print(f"in-process: {in_process[1]}", flush=True)
    baseline = mean_run(in_process)
    served = by_ingress[args.ingress[0]]
    scaling = query_scaling(args, questions, served) if args.query_replicas > 0 else None
    result = {
        "ingress": args.ingress[0],
        "rps": served["rps"],
        "p50_ms": served["p50_ms"],
        "p99_ms": served["p99_ms"],
        "errors": served["errors"],
        **ratios(served, baseline),
        "targets": targets(served, baseline),
        "served": served,
        "in_process": baseline,
        "in_process_runs": in_process,
        "by_ingress": {
            name: {**run, **ratios(run, baseline), "targets": targets(run, baseline)}
            for name, run in by_ingress.items()
        },
        "query_scaling": scaling,
        "config": {
            "clients": args.clients,
            "requests": args.requests,
            "route": "text",
            "top_k": 10,
            "questions": len(questions),
            "docs": len(pdfs),
            "pages_ingested_now": pages,
            "gateway_replicas": args.gateway_replicas,
            "index_placement": args.index_placement,
            "query_replicas": args.query_replicas,
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
        },
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print(
        json.dumps(
            {
                k: result[k]
                for k in (
                    "rps",
                    "p50_ms",
                    "p99_ms",
                    "errors",
                    "ingress",
                    "overhead_ratio",
                    "p99_ratio",
                    "throughput_ratio",
                    "targets",
                    "query_scaling",
                )
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
