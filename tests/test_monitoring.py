"""The alerts and the dashboard of manifests/components/{monitoring,grafana-dashboard}: promtool checks the
rules and runs tests/monitoring/alerts.test.yaml on them, and every metric they name is one the webhook
exports (with its type's suffix)."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from ruamel.yaml import YAML

from tests import tools
from tests.webhook_support import CONFLICTING, FakeEvents, cache_of
from webhook import audit
from webhook.metrics import Metrics

ROOT = Path(__file__).resolve().parent.parent
COMPONENTS = ROOT / "manifests" / "components"
RULES = COMPONENTS / "monitoring" / "prometheusrule.yaml"
DASHBOARD = COMPONENTS / "grafana-dashboard" / "overlay-guard.json"
UNIT_TESTS = Path(__file__).resolve().parent / "monitoring" / "alerts.test.yaml"
_SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "gauge": ("",)}


def _yaml() -> YAML:
    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = False
    return yaml


def groups() -> list[dict[str, Any]]:
    rule: dict[str, Any] = _yaml().load(RULES)
    assert rule["kind"] == "PrometheusRule"
    found: list[dict[str, Any]] = rule["spec"]["groups"]
    return found


def _promtool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([tools.promtool(), *args], capture_output=True, text=True, timeout=120)


@pytest.mark.tools
def test_promtool_checks_the_rules(tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    _yaml().dump({"groups": groups()}, rules)
    done = _promtool("check", "rules", str(rules))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {sum(len(g['rules']) for g in groups())} rules found" in done.stdout


@pytest.mark.tools
def test_every_alert_fires_in_promtool_unit_tests(tmp_path: Path) -> None:
    _yaml().dump({"groups": groups()}, tmp_path / "rules.yaml")
    annotations = {r["alert"]: r.get("annotations", {}) for g in groups() for r in g["rules"]}
    spec = _yaml().load(UNIT_TESTS)
    fired = set()
    for case in spec["tests"]:
        for check in case["alert_rule_test"]:
            for alert in check["exp_alerts"]:
                alert["exp_annotations"] = annotations[check["alertname"]]
                fired.add(check["alertname"])
    # Each alert is shown firing, and (tests/monitoring/alerts.test.yaml) quiet before its `for` has passed.
    assert fired == set(annotations)
    tests = tmp_path / "alerts.test.yaml"
    _yaml().dump(spec, tests)
    done = _promtool("test", "rules", str(tests))
    assert done.returncode == 0, done.stdout + done.stderr


async def _exported() -> set[str]:
    """The series names the webhook exports: every family, with its type's suffixes."""
    cache = await cache_of(*CONFLICTING)
    metrics = Metrics(cache)
    auditor = audit.Auditor(cache, FakeEvents(), instance="me")
    metrics.registry.register(audit.AuditCollector(auditor))
    await auditor.audit(cache.snapshot)
    text = metrics.render().decode()
    return {f.name + suffix for f in text_string_to_metric_families(text) for suffix in _SUFFIXES[f.type]}


def _named(text: str) -> set[str]:
    return set(re.findall(r"\boverlay_guard_\w+", text))


async def test_the_rules_and_the_dashboard_name_only_exported_metrics() -> None:
    exported = await _exported()
    exprs = [r["expr"] for g in groups() for r in g["rules"]]
    dashboard = json.loads(DASHBOARD.read_text())
    queries = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    named = _named("\n".join(exprs + queries))
    assert named and named <= exported, sorted(named - exported)
    # The gauges the alerts rest on.
    assert {"overlay_guard_ready", "overlay_guard_audit_overlays", "overlay_guard_audit_last_timestamp_seconds",
            "overlay_guard_admission_duration_seconds_bucket"} <= _named("\n".join(exprs))
