"""k8s/: the manifests validate offline, and the validator catches what it is there to catch.

Each negative case breaks one thing in a copy of a real manifest (or of the whole folder) and
expects validation to fail, so a validator that passes everything would fail here.
"""

from __future__ import annotations

import copy
import functools
import shutil
import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from k8s import sync_serve_config, validate
from k8s.validate import Doc

K8S = Path(__file__).resolve().parents[3] / "k8s"


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """kubernetes-validate must work from the schemas in its wheel: any connection fails."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise OSError("network access in an offline check")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def docs(name: str) -> list[Doc]:
    return validate.load(K8S / name)


@functools.cache
def _loaded() -> tuple[tuple[str, Doc], ...]:
    return tuple((p.name, doc) for p in validate.manifest_files(K8S) for doc in validate.load(p))


def all_docs() -> Iterator[tuple[str, Doc]]:
    """Every document of k8s/, parsed once per session; copies, so tests may change them."""
    yield from copy.deepcopy(_loaded())


def by_kind(kind: str, name: str) -> Doc:
    found = [doc for _, doc in all_docs() if (doc["kind"], doc["metadata"]["name"]) == (kind, name)]
    assert len(found) == 1, f"{kind}/{name}"
    return found[0]


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A copy of k8s/ to break."""
    copy_of = tmp_path / "k8s"
    shutil.copytree(K8S, copy_of, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    return copy_of


def test_every_manifest_validates(capsys: pytest.CaptureFixture[str]) -> None:
    code = validate.main([])
    *lines, summary = capsys.readouterr().out.splitlines()
    assert code == 0, "\n".join(lines)
    assert summary.endswith(", 0 failed") and all(line.startswith("ok   ") for line in lines)
    for kind in ("RayService", "RayJob", "StatefulSet", "Deployment", "NetworkPolicy", "Job"):
        assert f" {kind}/" in "\n".join(lines)


def _rayservice() -> Doc:
    return by_kind("RayService", "pagesight")


def _cluster(doc: Doc) -> Any:
    return doc["spec"]["rayClusterConfig"]


def _rename(mapping: dict[str, Any], old: str, new: str) -> None:
    mapping[new] = mapping.pop(old)


BREAKS: dict[str, Callable[[Doc], None]] = {
    "serveConfigV3": lambda d: _rename(d["spec"], "serveConfigV2", "serveConfigV3"),
    "rayStartParam": lambda d: _rename(
        _cluster(d)["headGroupSpec"], "rayStartParams", "rayStartParam"
    ),
    "container resource": lambda d: _rename(
        _cluster(d)["workerGroupSpecs"][1]["template"]["spec"]["containers"][0],
        "resources",
        "resource",
    ),
    "head pod field": lambda d: _rename(
        _cluster(d)["headGroupSpec"]["template"]["spec"], "volumes", "volume"
    ),
    "minReplicas string": lambda d: _cluster(d)["workerGroupSpecs"][0].update(minReplicas="one"),
    "deprecated threshold": lambda d: d["spec"].update(serviceUnhealthySecondThreshold=900),
    "upgrade type": lambda d: d["spec"]["upgradeStrategy"].update(type="Rolling"),
    "no template": lambda d: _cluster(d)["workerGroupSpecs"][0].pop("template"),
    "upscaling mode": lambda d: _cluster(d)["autoscalerOptions"].update(upscalingMode="Fast"),
}


@pytest.mark.parametrize("name", BREAKS)
def test_broken_rayservice_fails(name: str) -> None:
    doc = _rayservice()
    assert validate.check_schema(doc) == []
    BREAKS[name](doc)
    assert validate.check_schema(doc), name


def test_broken_rayjob_fails() -> None:
    job = by_kind("RayJob", "pagesight-bulk")
    assert validate.check_schema(job) == []
    job["spec"]["shutdownAfterJobFinishes"] = False  # a TTL then has no cluster to delete
    assert validate.check_schema(job)
    job = by_kind("RayJob", "pagesight-bulk")
    container = job["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    _rename(container, "volumeMounts", "volumeMount")
    (error,) = validate.check_schema(job)
    assert error.startswith("spec/rayClusterSpec/headGroupSpec/template/spec/containers/0:")
    assert "volumeMount" in error


def test_broken_core_kinds_fail() -> None:
    deployment = by_kind("Deployment", "vllm-answer")
    assert validate.check_schema(deployment) == []
    _rename(deployment["spec"], "replicas", "replica")
    assert validate.check_schema(deployment)
    statefulset = by_kind("StatefulSet", "postgres")
    statefulset["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["exec"][
        "command"
    ] = "pg_isready"  # a string where a list belongs
    assert validate.check_schema(statefulset)


def test_serve_config_must_equal_the_file(tmp_path: Path) -> None:
    doc = _rayservice()
    assert validate.check_serve_config(doc)[0] == []
    text = doc["spec"]["serveConfigV2"]
    assert "page_batch_size: 32" in text
    doc["spec"]["serveConfigV2"] = text.replace("page_batch_size: 32", "page_batch_size: 64")
    errors, _ = validate.check_serve_config(doc)
    assert errors and "differs" in errors[0]
    # The same config with another builder: equal to "the file", still refused.
    other = tmp_path / "gpu-cluster.yaml"
    other.write_text(
        text.replace("pagesight.entrypoints.serve_app:build_app", "services.other:build_app")
    )
    doc["spec"]["serveConfigV2"] = other.read_text()
    errors, _ = validate.check_serve_config(doc, other)
    assert errors == [
        f"spec/serveConfigV2: applications/0/import_path is not {validate.IMPORT_PATH}"
    ]


def test_comments_only_differences_are_a_note() -> None:
    doc = _rayservice()
    doc["spec"]["serveConfigV2"] = "# another comment\n" + doc["spec"]["serveConfigV2"]
    errors, notes = validate.check_serve_config(doc)
    assert errors == [] and "make k8s-sync" in notes[0]


def _set_resources(folder: Path, resources: list[str]) -> None:
    path = folder / "kustomization.yaml"
    kustomization = yaml.safe_load(path.read_text())
    kustomization["resources"] = resources
    path.write_text(yaml.safe_dump(kustomization))


def _listed(folder: Path) -> list[str]:
    return list(yaml.safe_load((folder / "kustomization.yaml").read_text())["resources"])


def test_kustomization_missing_a_file_fails(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _set_resources(folder, [name for name in _listed(folder) if name != "qdrant.yaml"])
    assert validate.main([str(folder)]) == 1
    assert "resources: qdrant.yaml is not listed" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("change", "error"),
    [
        (lambda names: [*names, "gone.yaml"], "resources: gone.yaml does not exist"),
        (lambda names: [*names, "secrets.yaml"], "secrets.yaml must be applied on its own"),
    ],
    ids=["missing file", "secrets listed"],
)
def test_kustomization_lists_only_what_it_should(
    folder: Path, change: Callable[[list[str]], list[str]], error: str
) -> None:
    assert validate.check_kustomization(folder, []).errors == []
    _set_resources(folder, change(_listed(folder)))
    assert error in " ".join(validate.check_kustomization(folder, []).errors)


def test_a_new_manifest_must_be_listed(folder: Path) -> None:
    shutil.copy(folder / "qdrant.yaml", folder / "qdrant-copy.yaml")
    errors = validate.check_kustomization(folder, []).errors
    assert errors == ["resources: qdrant-copy.yaml is not listed"]


def test_a_broken_file_fails_the_run(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = folder / "rayservice.yaml"
    path.write_text(path.read_text().replace("  serveConfigV2: |", "  serveConfigV3: |"))
    assert validate.main([str(folder)]) == 1
    out = capsys.readouterr().out
    assert "FAIL rayservice.yaml[0] RayService/pagesight" in out
    assert "'serveConfigV3' was unexpected" in out and "1 failed" in out


def test_one_image_tag(folder: Path) -> None:
    path = folder / "db-migrate-job.yaml"
    path.write_text(path.read_text().replace("pagesight-gpu:0.1.0", "pagesight-gpu:0.0.9"))
    loaded = [(p.name, d) for p in validate.manifest_files(folder) for d in validate.load(p)]
    errors = validate.check_kustomization(folder, loaded).errors
    assert errors and all("is not the kustomization's 0.1.0" in e for e in errors)


def _containers(doc: Doc) -> list[Doc]:
    return [c for _, t in validate.pod_templates(doc) for c in validate.containers(t)]


def test_conventions_hold_and_are_checked() -> None:
    workloads = [(f, d) for f, d in all_docs() if list(validate.pod_templates(d))]
    assert len(workloads) == 7
    for _, doc in workloads:
        assert validate.check_conventions(doc) == []
        for container in _containers(doc):
            assert container["resources"]["requests"], container["name"]
            assert not container["image"].endswith(":latest")
    for _, doc in all_docs():
        assert "namespace" not in doc["metadata"]
    doc = _rayservice()
    container = _cluster(doc)["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]
    container["image"] = "ghcr.io/pagesight/pagesight-gpu:latest"
    del container["resources"]["requests"]
    head = _cluster(doc)["headGroupSpec"]["template"]["metadata"]  # labels: shared by an anchor
    head["labels"] = {k: v for k, v in head["labels"].items() if k != "app.kubernetes.io/name"}
    doc["metadata"]["namespace"] = "prod"
    assert len(validate.check_conventions(doc)) == 4


def _selects(selector: Doc, labels: dict[str, str]) -> bool:
    """Kubernetes' label selector semantics for matchLabels and In/NotIn/Exists."""
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for expression in selector.get("matchExpressions") or []:
        key, operator, values = expression["key"], expression["operator"], expression.get("values")
        if operator == "In" and labels.get(key) not in values:
            return False
        if operator == "NotIn" and labels.get(key) in values:
            return False
        if operator == "Exists" and key not in labels:
            return False
    return True


def _pod_labels(doc: Doc) -> list[dict[str, str]]:
    return [t["metadata"]["labels"] for _, t in validate.pod_templates(doc)]


@pytest.mark.parametrize(
    ("kind", "name", "port"),
    [
        ("StatefulSet", "qdrant", 6333),
        ("StatefulSet", "qdrant", 6334),
        ("StatefulSet", "postgres", 5432),
        ("Deployment", "vllm-answer", 8000),
        ("Deployment", "vllm-vlm", 8000),
    ],
)
def test_network_policies_admit_only_pagesight_clients(kind: str, name: str, port: int) -> None:
    (server,) = _pod_labels(by_kind(kind, name))
    policies = [
        d
        for _, d in all_docs()
        if d["kind"] == "NetworkPolicy" and _selects(d["spec"]["podSelector"], server)
    ]
    assert len(policies) == 1, f"{name}: one NetworkPolicy selects it"
    (policy,) = policies
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    rules = [r for r in policy["spec"]["ingress"] if port in [p["port"] for p in r["ports"]]]
    assert rules, f"{name}: port {port} admitted"
    peers = [peer for rule in policy["spec"]["ingress"] for peer in rule["from"]]
    for peer in peers:  # pod peers in this namespace only, each one PageSight's
        assert set(peer) == {"podSelector"}
        assert peer["podSelector"]["matchLabels"]["app.kubernetes.io/part-of"] == "pagesight"
    ray_pods = _pod_labels(by_kind("RayService", "pagesight"))
    ray_pods += _pod_labels(by_kind("RayJob", "pagesight-bulk"))
    for labels in ray_pods:
        assert any(_selects(peer["podSelector"], labels) for rule in rules for peer in rule["from"])
    (vllm,) = _pod_labels(by_kind("Deployment", "vllm-vlm"))
    assert not any(_selects(peer["podSelector"], vllm) for peer in peers)
    migrate_admitted = any(
        _selects(peer["podSelector"], labels)
        for peer in peers
        for labels in _pod_labels(by_kind("Job", "pagesight-db-migrate"))
    )
    assert migrate_admitted == (name == "postgres")


def _serve_env() -> dict[str, str]:
    config = yaml.safe_load(validate.SERVE_CONFIG.read_text())
    env: dict[str, str] = config["applications"][0]["runtime_env"]["env_vars"]
    return env


@pytest.mark.parametrize(
    ("name", "url", "model"),
    [
        ("vllm-answer", "PAGESIGHT_LLM__BASE_URL", "PAGESIGHT_LLM__MODEL"),
        ("vllm-vlm", "PAGESIGHT_PARSE__VLM__BASE_URL", "PAGESIGHT_PARSE__VLM__MODEL"),
    ],
)
def test_vllm_servers_are_what_the_serve_config_calls(name: str, url: str, model: str) -> None:
    env = _serve_env()
    assert env[url] == f"http://{name}:8000/v1"
    deployment = by_kind("Deployment", name)
    (container,) = _containers(deployment)
    args = container["args"]
    assert args[args.index("--served-model-name") + 1] == env[model]
    assert args[args.index("--model") + 1].startswith("/models/")
    assert ":latest" not in container["image"] and container["image"].startswith("vllm/")
    for bound in ("requests", "limits"):
        assert str(container["resources"][bound]["nvidia.com/gpu"]) == "1"
    for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
        assert container[probe]["httpGet"] == {"path": "/health", "port": 8000}
    assert (
        container["startupProbe"]["failureThreshold"] * container["startupProbe"]["periodSeconds"]
        >= 600
    )
    assert {"name": "HF_HUB_OFFLINE", "value": "1"} in container["env"]
    volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
    assert volumes["dshm"]["emptyDir"]["medium"] == "Memory"
    assert volumes["models"]["persistentVolumeClaim"]["claimName"] == "pagesight-models"
    service = by_kind("Service", name)
    assert [p["port"] for p in service["spec"]["ports"]] == [8000]
    assert _selects({"matchLabels": service["spec"]["selector"]}, _pod_labels(deployment)[0])


def test_ray_pods_have_the_settings_and_sizes() -> None:
    doc = by_kind("RayService", "pagesight")
    cluster = _cluster(doc)
    assert cluster["enableInTreeAutoscaling"] is True
    assert cluster["headGroupSpec"]["rayStartParams"]["num-cpus"] == "0"
    groups = {g["groupName"]: g for g in cluster["workerGroupSpecs"]}
    assert set(groups) == {"cpu", "gpu"}
    gpu = groups["gpu"]["template"]["spec"]
    assert str(gpu["containers"][0]["resources"]["limits"]["nvidia.com/gpu"]) == "1"
    assert gpu["tolerations"][0]["key"] == "nvidia.com/gpu"
    # The Serve deployments' minimum fits the cpu group's minimum (page_embedder: gpu group).
    args = yaml.safe_load(doc["spec"]["serveConfigV2"])["applications"][0]["args"]
    need = sum(
        spec["num_cpus"] * spec.get("autoscaling", {}).get("min_replicas", spec.get("replicas", 1))
        for name, spec in args.items()
        if isinstance(spec, dict) and "num_cpus" in spec and not spec.get("num_gpus")
    )
    cpu = groups["cpu"]
    have = cpu["minReplicas"] * int(
        cpu["template"]["spec"]["containers"][0]["resources"]["limits"]["cpu"]
    )
    assert need <= have
    for _, template in validate.pod_templates(doc):
        (container,) = template["spec"]["containers"]
        env = {e["name"]: e for e in container["env"]}
        assert env["PAGESIGHT_DATABASE_URL"]["valueFrom"]["secretKeyRef"] == {
            "name": "pagesight-postgres",
            "key": "url",
        }
        assert (
            env["PAGESIGHT_QDRANT_API_KEY"]["valueFrom"]["secretKeyRef"]["name"]
            == "pagesight-qdrant"
        )
        assert env["PAGESIGHT_QDRANT_URL"]["value"] == "http://qdrant:6333"
        mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
        assert {"/data", "/models", "/secrets/postgres"} <= set(mounts)
        assert mounts["/models"]["readOnly"] is True


def test_postgres_is_ready_when_it_answers() -> None:
    (container,) = _containers(by_kind("StatefulSet", "postgres"))
    assert container["image"].startswith("postgres:16.")
    assert container["readinessProbe"]["exec"]["command"][0] == "pg_isready"
    env = {e["name"]: e for e in container["env"]}
    assert env["POSTGRES_PASSWORD"]["valueFrom"]["secretKeyRef"] == {
        "name": "pagesight-postgres",
        "key": "password",
    }
    (data,) = [m for m in container["volumeMounts"] if m["name"] == "data"]
    assert env["PGDATA"]["value"].startswith(data["mountPath"] + "/")


def test_secret_templates_hold_placeholders_only() -> None:
    for secret in docs("secrets.yaml"):
        values = secret["stringData"]
        assert "REPLACE_ME" in values.values(), secret["metadata"]["name"]
        assert all(v == "REPLACE_ME" for k, v in values.items() if k != "url")


def test_sync_rewrites_only_the_block(tmp_path: Path) -> None:
    manifest = (K8S / "rayservice.yaml").read_text()
    config = validate.SERVE_CONFIG.read_text()
    assert sync_serve_config.render(manifest, config) == manifest  # in sync: nothing to do
    stale = sync_serve_config.render(manifest, "proxy_location: EveryNode\napplications: []\n")
    assert sync_serve_config.embedded(stale) == "proxy_location: EveryNode\napplications: []\n"
    assert stale.splitlines()[-5:] == manifest.splitlines()[-5:]
    synced = sync_serve_config.render(stale, config)
    assert synced == manifest
    indented = sync_serve_config.render(manifest, "  # starts indented\nx: 1\n\n")
    assert sync_serve_config.embedded(indented) == "  # starts indented\nx: 1\n\n"
    with pytest.raises(ValueError):
        sync_serve_config.render("kind: RayService\nspec: {}\n", config)


def test_bulk_runs_with_the_serve_configs_settings() -> None:
    job = by_kind("RayJob", "pagesight-bulk")
    assert validate.check_bulk_settings(job) == []
    env = yaml.safe_load(job["spec"]["runtimeEnvYAML"])
    for key, value in (("PAGESIGHT_PARSE__VLM__MODEL", None), ("PAGESIGHT_VISUAL__MODEL", "x")):
        broken = copy.deepcopy(env)
        if value is None:
            del broken["env_vars"][key]
        else:
            broken["env_vars"][key] = value
        job["spec"]["runtimeEnvYAML"] = yaml.safe_dump(broken)
        errors = validate.check_bulk_settings(job)
        assert len(errors) == 1 and key in errors[0]
