"""Serve configs, builder args, API keys, trace ids, source allowlist: no Ray, no HTTP."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import yaml

from pagesight.api.images import parse_highlight
from pagesight.api.protocols import IndexBackend
from pagesight.core.errors import ErrorCode, PageSightError
from pagesight.core.keys_file import load_records, save_records
from pagesight.core.links import page_image_url
from pagesight.core.settings import ApiKeyRecord, Settings
from pagesight.core.settings_serving import ServeOptions
from pagesight.core.tracing import JsonLogFormatter, current_trace_id
from pagesight.entrypoints.serve_app import (
    GATEWAY_REPLICA_ENV,
    QUERY_METHODS,
    AppArgs,
    Autoscaling,
    DeploymentResources,
    _options,
    build_app,
    direct_ingress_environment,
    handle_for,
)
from pagesight.gateway.auth import KeyRing, new_key
from pagesight.gateway.limits import ConcurrencyLimiter, RateLimited
from pagesight.gateway.tracing import trace_id_from_headers
from pagesight.ingestion.url_sources import SourcePolicy

CONFIGS = sorted((Path(__file__).parents[3] / "pagesight" / "entrypoints" / "serve").glob("*.yaml"))


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_serve_configs_are_valid(path: Path) -> None:
    from ray.serve.schema import ServeDeploySchema

    document = yaml.safe_load(path.read_text())
    ServeDeploySchema.model_validate(document)
    for application in document["applications"]:
        assert application["import_path"] == "pagesight.entrypoints.serve_app:build_app"
        AppArgs.model_validate(application["args"])


def test_local_defaults_fit_two_cores() -> None:
    args = AppArgs()
    total = sum(
        r.num_cpus * r.replicas
        for r in (args.gateway, args.index, args.parser, args.text_embedder, args.page_embedder)
    )
    assert total <= 2.0


def test_the_local_profile_fits_two_cores_with_the_index_in_the_gateway() -> None:
    local = next(p for p in CONFIGS if p.name == "local.yaml")
    args = AppArgs.model_validate(yaml.safe_load(local.read_text())["applications"][0]["args"])
    assert args.index_placement == "colocated"  # the index deployment is not started
    deployed = (args.gateway, args.parser, args.text_embedder, args.page_embedder)
    assert sum(r.num_cpus * r.replicas for r in deployed) <= 2.0
    assert args.most_gateway_replicas == 1


def test_ingress_is_direct_only_where_pagesight_serve_starts_ray() -> None:
    assert ServeOptions().resolved_ingress == "direct"
    assert ServeOptions(ray_address="10.0.0.5:6379").resolved_ingress == "proxy"
    assert ServeOptions(ingress="proxy").resolved_ingress == "proxy"
    with pytest.raises(ValueError, match="needs the Ray"):
        ServeOptions(ingress="direct", ray_address="auto")


def test_direct_ingress_gives_each_gateway_replica_a_port_from_the_first() -> None:
    env = direct_ingress_environment(8000, 3)
    assert env["RAY_SERVE_ENABLE_DIRECT_INGRESS"] == "1"
    # Serve's allocator hands out range(min, max): 8000, 8001, 8002
    assert (
        env["RAY_SERVE_DIRECT_INGRESS_MIN_HTTP_PORT"],
        env["RAY_SERVE_DIRECT_INGRESS_MAX_HTTP_PORT"],
    ) == ("8000", "8003")
    assert float(env["RAY_SERVE_DIRECT_INGRESS_MIN_DRAINING_PERIOD_S"]) <= 1
    # one port per replica: a released one must be free again for the replica's replacement
    assert float(env["RAY_SERVE_PORT_QUARANTINE_S"]) == 0


def test_keys_authenticate_by_hash_only(tmp_path: Path) -> None:
    key, record = new_key("k1", "acme", ["group:finance"])
    assert key not in record.model_dump_json()
    path = tmp_path / "keys.json"
    save_records(path, [record])
    ring = KeyRing(load_records(path))
    caller = ring.authenticate(f"Bearer {key}", None)
    assert (caller.tenant, caller.principals, caller.key_id) == ("acme", ["group:finance"], "k1")
    assert ring.authenticate(None, key).tenant == "acme"
    for header in ("Bearer nope", "Basic abc", "Bearer ", None):
        with pytest.raises(PageSightError) as err:
            ring.authenticate(header, None)
        assert err.value.code == ErrorCode.UNAUTHORIZED
    with pytest.raises(ValueError, match="twice"):
        KeyRing([record, record])
    with pytest.raises(ValueError):
        ApiKeyRecord(key_id="x", sha256="not-a-digest", tenant="t")


def test_limiter_counts_per_key() -> None:
    limiter = ConcurrencyLimiter(default_limit=2)
    with limiter.slot("a"), limiter.slot("a"):
        with pytest.raises(RateLimited), limiter.slot("a"):
            pass
        with limiter.slot("b"):
            assert limiter.in_flight("b") == 1
    assert limiter.in_flight("a") == 0
    with limiter.slot("c", limit=1), pytest.raises(RateLimited), limiter.slot("c", limit=1):
        pass


def test_trace_ids_from_headers() -> None:
    tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    assert trace_id_from_headers(tp, "req-1") == "4bf92f3577b34da6a3ce929d0e0e4736"
    assert trace_id_from_headers("garbage", "req-1") == "req-1"
    assert trace_id_from_headers(f"00-{'0' * 32}-00f067aa0ba902b7-01", None) != "0" * 32
    fresh = trace_id_from_headers(None, "bad id with spaces\n")
    assert len(fresh) == 32 and fresh != trace_id_from_headers(None, None)


def test_json_log_lines_carry_the_trace_id() -> None:
    token = current_trace_id.set("abc123")
    try:
        record = logging.LogRecord("x", logging.INFO, __file__, 1, "hello %s", ("you",), None)
        record.doc_id = "d1"
        line = JsonLogFormatter().format(record)
    finally:
        current_trace_id.reset(token)
    import json

    parsed = json.loads(line)
    assert parsed["trace_id"] == "abc123" and parsed["message"] == "hello you"
    assert parsed["doc_id"] == "d1" and parsed["level"] == "INFO"


def test_highlight_round_trip() -> None:
    boxes = parse_highlight("10,20,30,40;1.5,2,3,4.5")
    assert [(b.x0, b.y1) for b in boxes] == [(10, 40), (1.5, 4.5)]
    url = page_image_url("doc/1", 3, boxes)
    assert url.startswith("/v1/documents/doc%2F1/pages/3/image?highlight=10.0,20.0,30.0,40.0;")
    for bad in ("1,2,3", "a,b,c,d", ";".join(["0,0,1,1"] * 51)):
        with pytest.raises(PageSightError) as err:
            parse_highlight(bad)
        assert err.value.code == ErrorCode.INVALID_REQUEST


def test_source_allowlist(tmp_path: Path) -> None:
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    (inbox / "a.pdf").write_bytes(b"%PDF")
    (tmp_path / "secret.pdf").write_bytes(b"%PDF")
    (inbox / "link.pdf").symlink_to(tmp_path / "secret.pdf")
    policy = SourcePolicy([inbox.as_uri() + "/", "https://docs.example.com/reports/"])
    assert policy.fetch((inbox / "a.pdf").as_uri(), tmp_path / "x") == (inbox / "a.pdf")
    assert policy.check("https://docs.example.com/reports/q3.pdf")
    for uri in (
        (tmp_path / "secret.pdf").as_uri(),
        (inbox / "link.pdf").as_uri(),  # a symlink out of the allowed directory
        inbox.as_uri() + "/../secret.pdf",
        "https://docs.example.com/private/q3.pdf",
        "https://docs.example.com.evil.io/reports/q3.pdf",
        "http://docs.example.com/reports/q3.pdf",  # other scheme (and port)
        "https://user:pw@docs.example.com/reports/q3.pdf",
        "gopher://docs.example.com/reports/q3.pdf",
    ):
        with pytest.raises(PageSightError) as err:
            policy.check(uri)
        assert err.value.code == ErrorCode.SOURCE_NOT_ALLOWED, uri
    with pytest.raises(PageSightError) as err:
        SourcePolicy([]).check((inbox / "a.pdf").as_uri())
    assert err.value.code == ErrorCode.SOURCE_NOT_ALLOWED


def test_private_addresses_are_refused() -> None:
    policy = SourcePolicy(["http://localhost:9/"])
    with pytest.raises(PageSightError) as err:
        policy.fetch("http://localhost:9/a.pdf", Path("/nonexistent/x.pdf"))
    assert err.value.code == ErrorCode.SOURCE_NOT_ALLOWED and "non-public" in err.value.message


def _cluster_args() -> AppArgs:
    document = yaml.safe_load((CONFIGS[0].parent / "gpu-cluster.yaml").read_text())
    return AppArgs.model_validate(document["applications"][0]["args"])


@pytest.mark.parametrize("placement", ["colocated", "separate"])
def test_the_gateway_runs_its_handlers_on_the_replicas_own_loop(placement: str) -> None:
    gateway = build_app(AppArgs(index_placement=placement))._bound_deployment  # Serve's own
    assert gateway.name == "Gateway"
    assert gateway.ray_actor_options["runtime_env"]["env_vars"] == GATEWAY_REPLICA_ENV
    assert GATEWAY_REPLICA_ENV == {"RAY_SERVE_RUN_USER_CODE_IN_SEPARATE_THREAD": "0"}


def test_cluster_config_autoscales_the_read_path() -> None:
    args = _cluster_args()
    assert args.read_path == "query"
    args.check(Settings(database_url="postgresql://u@db/p", qdrant_url="http://qdrant:6333"))
    for resources in (args.gateway, args.query, args.text_embedder, args.page_embedder):
        options = _options(resources)
        assert "num_replicas" not in options
        scaling = options["autoscaling_config"]
        assert 1 <= scaling["min_replicas"] <= scaling["max_replicas"]
        assert scaling["target_ongoing_requests"] <= resources.max_ongoing_requests
    assert _options(args.index)["num_replicas"] == 2  # writers claim jobs in PostgreSQL
    assert _options(args.page_embedder)["ray_actor_options"]["num_gpus"] == 1


def test_layouts_the_stores_cannot_serve_are_refused() -> None:
    cluster = _cluster_args()
    with pytest.raises(ValueError, match="needs PAGESIGHT_DATABASE_URL"):
        cluster.check(Settings(qdrant_url="http://qdrant:6333"))
    with pytest.raises(ValueError, match="embedded index and SQLite catalog have one writer"):
        cluster.check(Settings(database_url="postgresql://u@db/p"))  # embedded, 2 writers
    one_writer = cluster.model_copy(update={"index": DeploymentResources(replicas=1)})
    one_writer.check(Settings(database_url="postgresql://u@db/p"))  # reads through the owner
    colocated = one_writer.model_copy(update={"index_placement": "colocated"})
    with pytest.raises(ValueError, match="index_placement 'separate'"):
        colocated.check(Settings(database_url="postgresql://u@db/p"))
    AppArgs().check(Settings())  # the one-machine default
    with pytest.raises(ValueError, match="min_replicas is above max_replicas"):
        Autoscaling(min_replicas=3, max_replicas=2)


def test_reads_go_to_the_query_deployment_and_writes_to_the_writers() -> None:
    index, query = object(), object()
    methods = {  # IndexBackend's own and its roles' (QueryBackend, DocumentBackend)
        name
        for name in dir(IndexBackend)
        if callable(getattr(IndexBackend, name)) and not name.startswith("_")
    }
    assert methods >= QUERY_METHODS
    writes = {"submit_upload", "submit_uri", "delete"}
    for method in methods:
        expected = index if method in writes | {"readiness", "metrics_text"} else query
        assert handle_for(method, index, query) is expected, method
        assert handle_for(method, index, None) is index
