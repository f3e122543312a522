"""Offline checks of the Kubernetes manifests in k8s/ (`make check-k8s`, CI's k8s step).

There is no cluster in CI, so nothing else would notice a misspelt field before a platform team
applies these files. Core kinds are validated by kubernetes-validate against the Kubernetes
OpenAPI schemas its wheel ships (strict: unknown fields fail; no network). KubeRay's kinds have
no schema there: they are validated by the one written down from KubeRay's CRDs in
k8s/schemas/, and each of their pod templates as a core PodTemplate. Then what ties the files
together: the RayService serves pagesight/entrypoints/serve/gpu-cluster.yaml, the kustomization
lists the stack, every pod template carries the labels the NetworkPolicies select on, every
container asks for resources, and the PageSight image has one tag everywhere. The monitoring
files (prometheus/alerts.yaml, grafana/pagesight-dashboard.json) are checked by shape, and by
`promtool check rules` and `promtool test rules` where promtool is installed (Debian's
`prometheus` package, `make system-deps`); the kustomization ships them as ConfigMaps.

    python -m k8s.validate [DIR] [--serve-config FILE] [--kubernetes-version 1.33]
"""

from __future__ import annotations

import argparse
import functools
import json
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import yaml

HERE = Path(__file__).resolve().parent
SERVE_CONFIG = HERE.parent / "pagesight" / "entrypoints" / "serve" / "gpu-cluster.yaml"
RAY_SCHEMA = HERE / "schemas" / "ray.io_v1.schema.yaml"
# The oldest Kubernetes the manifests are meant for: fields added after it fail here.
KUBERNETES_VERSION = "1.33"
APP_IMAGE = "ghcr.io/pagesight/pagesight-gpu"
IMPORT_PATH = "pagesight.entrypoints.serve_app:build_app"
PART_OF = "app.kubernetes.io/part-of"
NAME = "app.kubernetes.io/name"
# Manifests the kustomization leaves out on purpose (see kustomization.yaml's header).
NOT_IN_KUSTOMIZATION = frozenset({"secrets.yaml", "db-migrate-job.yaml", "rayjob-bulk.yaml"})

Doc = dict[str, Any]


@dataclass
class Result:
    """One line of the report: a document (or the kustomization) and what is wrong with it."""

    name: str
    errors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def load(path: Path) -> list[Doc]:
    """The non-empty YAML documents of one file (libyaml's loader where present: 5x faster)."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return [doc for doc in yaml.load_all(path.read_text(), Loader=loader) if doc is not None]


def manifest_files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.glob("*.yaml") if p.name != "kustomization.yaml")


@functools.cache
def _ray_validator(kind: str) -> jsonschema.protocols.Validator:
    schema = yaml.safe_load(RAY_SCHEMA.read_text())
    return jsonschema.Draft202012Validator({**schema, "$ref": f"#/$defs/{kind}"})


def _path(parts: Any, where: str = "") -> str:
    return "/".join([where, *map(str, parts)] if where else map(str, parts)) or "(top)"


def pod_templates(doc: Doc) -> Iterator[tuple[str, Doc]]:
    """(path, template) for every pod template in a manifest, Ray's and core workloads'."""
    spec = doc.get("spec") or {}
    if doc.get("apiVersion") == "ray.io/v1":
        key = "rayClusterConfig" if doc.get("kind") == "RayService" else "rayClusterSpec"
        cluster = spec.get(key) or {}
        head = cluster.get("headGroupSpec") or {}
        if isinstance(head.get("template"), dict):
            yield f"spec/{key}/headGroupSpec/template", head["template"]
        for i, group in enumerate(cluster.get("workerGroupSpecs") or []):
            if isinstance(group, dict) and isinstance(group.get("template"), dict):
                yield f"spec/{key}/workerGroupSpecs/{i}/template", group["template"]
        if isinstance(spec.get("submitterPodTemplate"), dict):
            yield "spec/submitterPodTemplate", spec["submitterPodTemplate"]
    elif isinstance(spec.get("template"), dict) and doc.get("kind") != "PodTemplate":
        yield "spec/template", spec["template"]


def _kubernetes(doc: Doc, version: str, where: str = "", skip: int = 0) -> list[str]:
    """kubernetes-validate's first error (it stops there), its path under `where` less `skip`
    leading parts."""
    try:
        kubernetes_validate.validate(doc, version, strict=True)
    except kubernetes_validate.ValidationError as error:
        return [f"{_path(list(error.path)[skip:], where)}: {error.message}"]
    except kubernetes_validate.SchemaNotFoundError as error:
        return [error.message]
    return []


def check_schema(doc: Doc, version: str = KUBERNETES_VERSION) -> list[str]:
    """The document against its kind's schema; Ray pod templates as core PodTemplates."""
    if doc.get("apiVersion") != "ray.io/v1":
        return _kubernetes(doc, version)
    kind = doc.get("kind")
    if kind not in ("RayService", "RayJob"):
        return [f"no schema for ray.io/v1 {kind} in {RAY_SCHEMA.name}"]
    found = sorted(_ray_validator(kind).iter_errors(doc), key=lambda e: _path(e.absolute_path))
    errors = [f"{_path(error.absolute_path)}: {error.message}" for error in found]
    for where, template in pod_templates(doc):
        wrapped = {
            "apiVersion": "v1",
            "kind": "PodTemplate",
            "metadata": {"name": "pod-template"},
            "template": template,
        }
        errors += _kubernetes(wrapped, version, where, skip=1)  # less the wrapper's "template"
    return errors


def containers(template: Doc) -> list[Doc]:
    spec = template.get("spec") or {}
    return [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]


def check_conventions(doc: Doc) -> list[str]:
    """What the schemas cannot say: no namespace (the platform team picks one), the labels the
    NetworkPolicies select on, resource requests, pinned images."""
    errors = []
    if "namespace" in (doc.get("metadata") or {}):
        errors.append("metadata/namespace: hard-coded (leave it to kubectl -n / kustomize)")
    for where, template in pod_templates(doc):
        labels = (template.get("metadata") or {}).get("labels") or {}
        if labels.get(PART_OF) != "pagesight" or not labels.get(NAME):
            errors.append(f"{where}/metadata/labels: needs {PART_OF}: pagesight and {NAME}")
        for container in containers(template):
            name, image = container.get("name"), str(container.get("image", ""))
            if not (container.get("resources") or {}).get("requests"):
                errors.append(f"{where}: container {name} has no resources.requests")
            tag = image.rsplit("/", 1)[-1].partition(":")[2]
            if tag in ("", "latest") and "@sha256:" not in image:
                errors.append(f"{where}: container {name} image {image!r} is not pinned")
    return errors


def check_serve_config(doc: Doc, serve_config: Path = SERVE_CONFIG) -> tuple[list[str], list[str]]:
    """(errors, notes): the RayService must serve exactly the Serve config file, and every
    application must be PageSight's builder."""
    text = (doc.get("spec") or {}).get("serveConfigV2")
    if not isinstance(text, str):
        return ["spec/serveConfigV2: missing"], []
    try:
        embedded = yaml.safe_load(text)
    except yaml.YAMLError as error:
        return [f"spec/serveConfigV2: not YAML: {error}"], []
    errors, notes = [], []
    source = serve_config.read_text()
    if embedded != yaml.safe_load(source):
        errors.append(f"spec/serveConfigV2: differs from {serve_config.name} (make k8s-sync)")
    elif text != source:
        notes.append(f"equal to {serve_config.name} once parsed; make k8s-sync copies its text")
    else:
        notes.append(f"serveConfigV2 = {serve_config.name}")
    for i, app in enumerate((embedded or {}).get("applications") or []):
        if app.get("import_path") != IMPORT_PATH:
            errors.append(f"spec/serveConfigV2: applications/{i}/import_path is not {IMPORT_PATH}")
    return errors, notes


def check_bulk_settings(doc: Doc, serve_config: Path = SERVE_CONFIG) -> list[str]:
    """A bulk RayJob ingests into the same index and catalog as the RayService: it must run with
    every PAGESIGHT_* setting of the Serve config's application, with the same values (a VLM or
    page model missing here would index bulk documents differently from uploads)."""
    try:
        runtime_env = yaml.safe_load((doc.get("spec") or {}).get("runtimeEnvYAML") or "") or {}
    except yaml.YAMLError as error:
        return [f"spec/runtimeEnvYAML: not YAML: {error}"]
    job_env = runtime_env.get("env_vars") or {}
    errors = []
    for app in yaml.safe_load(serve_config.read_text()).get("applications") or []:
        for key, value in ((app.get("runtime_env") or {}).get("env_vars") or {}).items():
            if key.startswith("PAGESIGHT_") and job_env.get(key) != value:
                errors.append(
                    f"spec/runtimeEnvYAML: {key} is {job_env.get(key)!r}, the Serve config's "
                    f"is {value!r}"
                )
    return errors


def check_kustomization(directory: Path, docs: list[tuple[str, Doc]]) -> Result:
    """The kustomization lists every manifest but the deliberate exceptions, only files that
    exist, and sets the PageSight image's tag that the files apply on their own also pin."""
    result = Result("kustomization.yaml")
    path = directory / "kustomization.yaml"
    if not path.is_file():
        result.errors.append("missing")
        return result
    kustomization = yaml.safe_load(path.read_text()) or {}
    if (kustomization.get("apiVersion"), kustomization.get("kind")) != (
        "kustomize.config.k8s.io/v1beta1",
        "Kustomization",
    ):
        result.errors.append("not a kustomize.config.k8s.io/v1beta1 Kustomization")
    listed = list(kustomization.get("resources") or [])
    result.errors += [
        f"resources: {name} does not exist" for name in listed if not (directory / name).is_file()
    ]
    for name in sorted({p.name for p in manifest_files(directory)} - set(listed)):
        if name not in NOT_IN_KUSTOMIZATION:
            result.errors.append(f"resources: {name} is not listed")
    for name in sorted(set(listed) & NOT_IN_KUSTOMIZATION):
        result.errors.append(f"resources: {name} must be applied on its own, not listed")
    tags = [
        i.get("newTag") for i in kustomization.get("images") or [] if i.get("name") == APP_IMAGE
    ]
    if len(tags) != 1:
        result.errors.append(f"images: needs one entry for {APP_IMAGE}")
        return result
    for where, doc in docs:
        for _, template in pod_templates(doc):
            for container in containers(template):
                image = str(container.get("image", ""))
                if image.startswith(f"{APP_IMAGE}:") and image != f"{APP_IMAGE}:{tags[0]}":
                    result.errors.append(f"{where}: {image} is not the kustomization's {tags[0]}")
    result.notes.append(f"{len(listed)} resources, {APP_IMAGE}:{tags[0]}")
    return result


def validate(
    directory: Path = HERE,
    serve_config: Path = SERVE_CONFIG,
    version: str = KUBERNETES_VERSION,
) -> list[Result]:
    """Every document of every manifest in `directory`, then the kustomization."""
    results, docs = [], []
    for path in manifest_files(directory):
        try:
            loaded = load(path)
        except yaml.YAMLError as error:
            results.append(Result(path.name, [f"not YAML: {error}"]))
            continue
        for i, doc in enumerate(loaded):
            if not isinstance(doc, dict):
                results.append(Result(f"{path.name}[{i}]", ["not a mapping"]))
                continue
            name = f"{path.name}[{i}] {doc.get('kind')}/{(doc.get('metadata') or {}).get('name')}"
            result = Result(name, check_schema(doc, version) + check_conventions(doc))
            if doc.get("apiVersion") == "ray.io/v1":
                templates = sum(1 for _ in pod_templates(doc))
                result.notes.append(f"{RAY_SCHEMA.name}, {templates} pod templates as PodTemplate")
            if doc.get("kind") == "RayService":
                errors, notes = check_serve_config(doc, serve_config)
                result.errors += errors
                result.notes += notes
            if doc.get("kind") == "RayJob":
                result.errors += check_bulk_settings(doc, serve_config)
            results.append(result)
            docs.append((name, doc))
    results.append(check_kustomization(directory, docs))
    results += check_monitoring(directory)
    return results


# -- monitoring: alert rules and the dashboard ---------------------------------------------------

RULES = Path("prometheus") / "alerts.yaml"
RULE_TESTS = Path("prometheus") / "alerts.test.yaml"
DASHBOARD = Path("grafana") / "pagesight-dashboard.json"
_GROUP_KEYS = frozenset({"name", "interval", "limit", "rules"})
_DURATION = re.compile(r"^([0-9]+(ms|s|m|h|d|w|y))+$")
_PROMQL_WORDS = frozenset(
    {"and", "or", "unless", "by", "without", "on", "ignoring", "group_left", "group_right"}
    | {"offset", "bool", "inf", "nan", "e"}
)


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression (or a Grafana ``label_values(...)`` query) reads:
    what is left once strings, label matchers, ranges, grouping clauses and function names are
    taken out."""
    found = re.fullmatch(r"\s*label_values\((.*),\s*\w+\s*\)\s*", expr, re.S)
    if found:
        expr = found.group(1)
    expr = re.sub(r'"(\\.|[^"\\])*"', "", expr)  # strings, label values among them
    expr = re.sub(r"\{[^}]*\}|\[[^\]]*\]", " ", expr)  # matchers, ranges, $__rate_interval
    expr = re.sub(
        r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", expr
    )  # label lists
    names = re.findall(r"(?<![\w.$])([a-zA-Z_:][a-zA-Z0-9_:]*)\b(?!\s*\()", expr)
    return {name for name in names if name.lower() not in _PROMQL_WORDS}


def rule_exprs(path: Path) -> dict[str, str]:
    """Alert or record name -> expression, for every rule of a rule file."""
    groups = (yaml.safe_load(path.read_text()) or {}).get("groups") or []
    return {
        str(rule.get("alert") or rule.get("record")): str(rule.get("expr", ""))
        for group in groups
        for rule in group.get("rules") or []
    }


def dashboard_exprs(path: Path) -> dict[str, str]:
    """Panel title (or variable name) -> query, for every target and query variable."""
    dashboard = json.loads(path.read_text())
    exprs = {
        f"{panel.get('title')} [{target.get('refId')}]": str(target.get("expr", ""))
        for panel in dashboard.get("panels") or []
        for target in panel.get("targets") or []
    }
    for variable in (dashboard.get("templating") or {}).get("list") or []:
        if variable.get("type") == "query":
            query = variable.get("query")
            exprs[f"${variable.get('name')}"] = str(
                query.get("query", "") if isinstance(query, dict) else query
            )
    return exprs


def check_rules_shape(path: Path) -> list[str]:
    """What Prometheus needs of a rule file, for machines without promtool."""
    errors: list[str] = []
    try:
        loaded = yaml.safe_load(path.read_text())
    except yaml.YAMLError as error:
        return [f"not YAML: {error}"]
    groups = loaded.get("groups") if isinstance(loaded, dict) else None
    if not isinstance(groups, list) or not groups:
        return ["groups: a non-empty list is needed"]
    seen: set[str] = set()
    for i, group in enumerate(groups):
        where = f"groups/{i}"
        if not isinstance(group, dict) or not group.get("name") or not group.get("rules"):
            errors.append(f"{where}: needs a name and rules")
            continue
        if set(group) - _GROUP_KEYS:
            errors.append(f"{where}: unknown fields {sorted(set(group) - _GROUP_KEYS)}")
        for j, rule in enumerate(group["rules"]):
            errors += _check_rule(rule, f"{where}/rules/{j}", seen)
    return errors


def _check_rule(rule: Any, here: str, seen: set[str]) -> list[str]:
    if not isinstance(rule, dict):
        return [f"{here}: not a mapping"]
    errors = []
    extra = set(rule) - {"alert", "record", "expr", "for", "labels", "annotations"}
    name = rule.get("alert") or rule.get("record")
    if extra or not name or ("alert" in rule) == ("record" in rule):
        errors.append(f"{here}: one of alert/record, expr, for, labels, annotations")
    if not metric_names(str(rule.get("expr", ""))):
        errors.append(f"{here}: expr reads no metric")
    if "for" in rule and not _DURATION.match(str(rule["for"])):
        errors.append(f"{here}: for {rule['for']!r} is not a duration")
    errors += [
        f"{here}: {key} must be a mapping"
        for key in ("labels", "annotations")
        if not isinstance(rule.get(key, {}), dict)
    ]
    if name in seen:
        errors.append(f"{here}: {name} is defined twice")
    seen.add(str(name))
    return errors


def check_dashboard_shape(path: Path) -> list[str]:
    """A Grafana dashboard that imports: a uid, panels with unique ids and a place on the grid,
    every query on the dashboard's Prometheus variable and reading some metric."""
    try:
        dashboard = json.loads(path.read_text())
    except ValueError as error:
        return [f"not JSON: {error}"]
    errors = [f"{key}: missing" for key in ("title", "uid", "panels") if not dashboard.get(key)]
    ids = [panel.get("id") for panel in dashboard.get("panels") or []]
    if len(ids) != len(set(ids)) or None in ids:
        errors.append("panels: ids must be present and unique")
    for panel in dashboard.get("panels") or []:
        where = f"panel {panel.get('title')!r}"
        grid = panel.get("gridPos") or {}
        if not all(isinstance(grid.get(k), int) for k in ("h", "w", "x", "y")):
            errors.append(f"{where}: gridPos needs h, w, x, y")
        if panel.get("type") == "row":
            continue
        if (panel.get("datasource") or {}).get("uid") != "${datasource}":
            errors.append(f"{where}: datasource must be the $datasource variable")
        if not panel.get("targets"):
            errors.append(f"{where}: no query")
    for name, expr in dashboard_exprs(path).items():
        if not metric_names(expr):
            errors.append(f"{name}: reads no metric: {expr!r}")
    return errors


def _promtool(promtool: str, *args: str, cwd: Path) -> list[str]:
    done = subprocess.run(
        [promtool, *args], cwd=cwd, capture_output=True, text=True, timeout=120, check=False
    )
    if done.returncode == 0:
        return []
    return [f"promtool {args[0]} {args[1]}: {line}" for line in done.stdout.splitlines()[-15:]]


def check_monitoring(directory: Path) -> list[Result]:
    """The alert rules (promtool where installed, else their shape), the dashboard, and the
    kustomization's ConfigMaps shipping both."""
    rules, tests, dashboard = directory / RULES, directory / RULE_TESTS, directory / DASHBOARD
    results = []
    for path in (rules, tests, dashboard):
        if not path.is_file():
            results.append(Result(str(path.relative_to(directory)), ["missing"]))
    if results:
        return results
    result = Result(str(RULES), check_rules_shape(rules))
    promtool = shutil.which("promtool")
    if promtool is None:
        result.notes.append("promtool not installed: shape checked only")
    elif not result.errors:
        result.errors += _promtool(promtool, "check", "rules", rules.name, cwd=rules.parent)
        result.errors += _promtool(promtool, "test", "rules", tests.name, cwd=tests.parent)
        result.notes.append(f"promtool check rules, promtool test rules {tests.name}")
    result.notes.append(f"{len(rule_exprs(rules))} rules")
    results.append(result)
    shape = Result(str(DASHBOARD), check_dashboard_shape(dashboard))
    shape.notes.append(f"{len(dashboard_exprs(dashboard))} queries")
    results.append(shape)
    kustomization = yaml.safe_load((directory / "kustomization.yaml").read_text()) or {}
    shipped = {
        str(name).rpartition("=")[2]
        for generator in kustomization.get("configMapGenerator") or []
        for name in generator.get("files") or []
    }
    missing = {str(RULES), str(DASHBOARD)} - shipped
    gone = {name for name in shipped if not (directory / name).is_file()}
    results.append(
        Result(
            "kustomization.yaml configMapGenerator",
            [f"{name}: not shipped as a ConfigMap" for name in sorted(missing)]
            + [f"{name}: does not exist" for name in sorted(gone)],
        )
    )
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", nargs="?", type=Path, default=HERE)
    parser.add_argument("--serve-config", type=Path, default=SERVE_CONFIG)
    parser.add_argument("--kubernetes-version", default=KUBERNETES_VERSION)
    args = parser.parse_args(argv)
    results = validate(args.directory, args.serve_config, args.kubernetes_version)
    for result in results:
        status = "FAIL" if result.errors else "ok  "
        notes = f" ({'; '.join(result.notes)})" if result.notes else ""
        print(f"{status} {result.name}{notes}")
        for error in result.errors:
            print(f"       {error}")
    failed = sum(1 for r in results if r.errors)
    print(f"{len(results)} checked against Kubernetes {args.kubernetes_version}, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
