"""k8s/prometheus and k8s/grafana: the alert rules and the dashboard validate offline, and the
validator catches a broken rule, a broken panel and a file the kustomization does not ship.
Which metrics they read is checked against a live scrape in
tests/integration/test_metrics_fleet.py."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from k8s import validate

K8S = Path(__file__).resolve().parents[3] / "k8s"
ALERTS = ("error rate", "p99", "queue", "job")


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    copy_of = tmp_path / "k8s"
    shutil.copytree(K8S, copy_of, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    return copy_of


def _errors(directory: Path) -> list[str]:
    return [e for r in validate.check_monitoring(directory) for e in r.errors]


def test_the_shipped_rules_and_dashboard_pass() -> None:
    assert _errors(K8S) == []


def test_the_alerts_cover_errors_latency_queues_and_jobs() -> None:
    rules = validate.rule_exprs(K8S / validate.RULES)
    read = " ".join(sorted({m for e in rules.values() for m in validate.metric_names(e)}))
    assert "http_requests_total" in read  # error rate
    assert "_bucket" in read and any("histogram_quantile(0.99" in e for e in rules.values())
    assert "queued_queries" in read and "ingest_queue_depth" in read
    assert "ingest_jobs_total" in read


def test_promtool_is_used_where_installed() -> None:
    if shutil.which("promtool") is None:
        pytest.skip("promtool is not installed (Debian's prometheus package, make system-deps)")
    (result,) = [r for r in validate.check_monitoring(K8S) if r.name == str(validate.RULES)]
    assert any("promtool test rules" in note for note in result.notes), result.notes


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda g: g[0]["rules"][0].update(expr=""), "reads no metric"),
        (lambda g: g[0]["rules"][0].update(fro="5m"), "one of alert/record"),
        (lambda g: g[0]["rules"][0].update({"for": "five minutes"}), "not a duration"),
        (lambda g: g[1]["rules"].append(dict(g[0]["rules"][0])), "defined twice"),
    ],
)
def test_a_broken_rule_fails_by_shape(folder: Path, change: object, expected: str) -> None:
    path = folder / validate.RULES
    rules = yaml.safe_load(path.read_text())
    change(rules["groups"])  # type: ignore[operator]
    path.write_text(yaml.safe_dump(rules))
    assert any(expected in e for e in validate.check_rules_shape(path)), expected


def test_a_rule_promtool_refuses_fails(folder: Path) -> None:
    if shutil.which("promtool") is None:
        pytest.skip("promtool is not installed")
    path = folder / validate.RULES
    rules = yaml.safe_load(path.read_text())
    rules["groups"][0]["rules"][0]["expr"] = "sum(rate(ray_pagesight_http_requests_total[5m])"
    path.write_text(yaml.safe_dump(rules))
    assert any("promtool check rules" in e for e in _errors(folder))


def test_an_alert_that_no_longer_fires_fails_its_unit_test(folder: Path) -> None:
    if shutil.which("promtool") is None:
        pytest.skip("promtool is not installed")
    path = folder / validate.RULES
    text = path.read_text()
    assert "> 0.05" in text
    path.write_text(text.replace("> 0.05", "> 0.5", 1))  # a threshold no test traffic reaches
    assert any("promtool test rules" in e for e in _errors(folder))


def test_a_broken_panel_fails(folder: Path) -> None:
    path = folder / validate.DASHBOARD
    dashboard = json.loads(path.read_text())
    panel = next(p for p in dashboard["panels"] if p["type"] != "row")
    panel["datasource"] = {"type": "prometheus", "uid": "prod-prometheus"}
    panel["targets"][0]["expr"] = "sum(rate()"
    dashboard["panels"].append(dict(panel))  # same id twice
    path.write_text(json.dumps(dashboard))
    errors = validate.check_dashboard_shape(path)
    assert any("datasource" in e for e in errors)
    assert any("reads no metric" in e for e in errors)
    assert any("unique" in e for e in errors)


def test_the_kustomization_must_ship_both_as_configmaps(folder: Path) -> None:
    path = folder / "kustomization.yaml"
    kustomization = yaml.safe_load(path.read_text())
    kustomization["configMapGenerator"] = kustomization["configMapGenerator"][:1]
    kustomization["configMapGenerator"][0]["files"].append("prometheus/gone.yaml")
    path.write_text(yaml.safe_dump(kustomization))
    errors = _errors(folder)
    assert any(str(validate.DASHBOARD) in e and "not shipped" in e for e in errors)
    assert any("gone.yaml: does not exist" in e for e in errors)


def test_a_missing_file_fails(folder: Path) -> None:
    (folder / validate.DASHBOARD).unlink()
    assert "missing" in _errors(folder)


@pytest.mark.parametrize(
    ("expr", "names"),
    [
        ('sum by (le) (rate(a_bucket{route="/v1/search"}[5m]))', {"a_bucket"}),
        ("x / on(job) group_left(instance) y > bool 0.5", {"x", "y"}),
        ('label_values(m_total{application="$application"}, deployment)', {"m_total"}),
        (
            'histogram_quantile(0.99, rate(h_bucket{a=~"b|c"}[$__rate_interval])) > 1e-3',
            {"h_bucket"},
        ),
        ('count(up{job="a"}) without (instance) offset 5m', {"up"}),
    ],
)
def test_metric_names(expr: str, names: set[str]) -> None:
    assert validate.metric_names(expr) == names
