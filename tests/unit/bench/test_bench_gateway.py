"""``make bench-gateway``'s command line builds valid Serve application arguments.

The benchmark ingests and runs searches for minutes before it starts Ray Serve; an argument the
application does not accept (``--index-placement auto`` was the default once) must fail here
instead, without running anything.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
import yaml

from bench import bench_gateway
from pagesight.entrypoints.serve_app import AppArgs
from pagesight.gateway.auth import new_key

REPO_ROOT = Path(__file__).resolve().parents[3]
LOCAL_CONFIG = REPO_ROOT / "pagesight" / "entrypoints" / "serve" / "local.yaml"


def _make_target_argv() -> list[str]:
    """The bench's arguments in the Makefile's ``bench-gateway`` recipe."""
    lines = (REPO_ROOT / "Makefile").read_text().splitlines()
    start = lines.index(next(line for line in lines if line.startswith("bench-gateway:")))
    recipe = next(line for line in lines[start + 1 :] if "bench_gateway.py" in line)
    words = shlex.split(recipe)
    return words[words.index("bench/bench_gateway.py") + 1 :]


def _app_args(argv: list[str], tmp_path: Path) -> AppArgs:
    args = bench_gateway.parser().parse_args(argv)
    _, record = new_key("bench", bench_gateway.TENANT)
    return bench_gateway.app_args(
        tmp_path / "data", record, args.clients, args.gateway_replicas, args.index_placement
    )


def test_make_target_arguments_build_app_args(tmp_path: Path) -> None:
    argv = _make_target_argv()
    assert "--out" in argv
    built = _app_args(argv, tmp_path)
    # it measures the one-machine profile `pagesight serve` runs
    local = yaml.safe_load(LOCAL_CONFIG.read_text())["applications"][0]["args"]
    assert built.index_placement == local["index_placement"]
    assert built.gateway.replicas == 1
    assert built.resolved_settings().gateway.api_keys[0].key_id == "bench"
    # what the Serve config round trip (build_app(dict)) would validate again
    assert AppArgs.model_validate(built.model_dump()) == built


def test_every_placement_choice_is_an_app_args_value(tmp_path: Path) -> None:
    choices, default = bench_gateway.placements()
    assert default in choices
    for choice in choices:
        argv = ["--out", str(tmp_path / "g.json"), "--index-placement", choice]
        assert _app_args(argv, tmp_path).index_placement == choice


def test_unknown_placement_is_refused_at_parse_time(tmp_path: Path) -> None:
    with pytest.raises(SystemExit):
        bench_gateway.parser().parse_args(["--out", "x.json", "--index-placement", "auto"])


def test_query_replica_runs_build_the_cluster_read_path(tmp_path: Path) -> None:
    argv = _make_target_argv()
    args = bench_gateway.parser().parse_args(argv)
    assert args.query_replicas == 2  # `make bench-gateway` measures the read path's replicas
    _, record = new_key("bench", bench_gateway.TENANT)
    built = bench_gateway.app_args(
        tmp_path / "data",
        record,
        args.clients,
        args.gateway_replicas,
        bench_gateway.QUERY_PLACEMENT,
        query_replicas=args.query_replicas,
        database_url="postgresql://bench@127.0.0.1:5432/bench",
    )
    assert (built.read_path, built.query.replicas) == ("query", 2)
    with pytest.raises(ValueError, match="needs PAGESIGHT_DATABASE_URL"):
        bench_gateway.app_args(
            tmp_path / "data", record, 16, 1, bench_gateway.QUERY_PLACEMENT, query_replicas=2
        )
