"""The alerting rules and the dashboard are built on what /metrics exports: every metric they name is one the
console serves (scraped here, as Prometheus does, with the bearer token), with the labels they group and
filter by; every alert says how bad it is and what the console shows for it."""

import json
import re
from pathlib import Path

import pytest
import yaml
from django.urls import reverse
from prometheus_client.parser import text_string_to_metric_families

from tests.reconciliation.conftest import health_world, world  # noqa: F401 - fixtures

pytestmark = pytest.mark.django_db(databases=["default", "delivery"])

MONITORING = Path(__file__).resolve().parents[2] / "monitoring"
RULES = MONITORING / "prometheus" / "alerts.yml"
DASHBOARD = MONITORING / "grafana" / "handoff-console.json"
# Series Prometheus makes itself for every scrape target, not served by the console.
SCRAPE_SERIES = {"up"}
# PromQL's functions, aggregations and keywords as the rules and panels use them.
PROMQL_WORDS = {
    *("sum", "max", "min", "avg", "count", "rate", "increase", "time", "vector", "label_values"),
    *("by", "without", "on", "ignoring", "and", "or", "unless", "bool"),
}
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring)\s*\(([^)]*)\)")
_MATCHERS = re.compile(r"([A-Za-z_:][\w:]*)\s*\{([^}]*)\}")
_LABEL = re.compile(r"([A-Za-z_]\w*)\s*(?:=~|!~|!=|=)")


def scrape(client) -> dict[str, set[str]]:
    """The exported series names (counters with their `_total`), each with the label names its samples carry."""
    response = client.get(
        reverse("reconciliation:metrics"), HTTP_AUTHORIZATION="Bearer metrics-test-token"
    )
    assert response.status_code == 200
    exported: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(response.content.decode()):
        name = f"{family.name}_total" if family.type == "counter" else family.name
        exported.setdefault(name, set())
        for sample in family.samples:
            exported.setdefault(sample.name, set()).update(sample.labels)
    return exported


def rule_expressions() -> dict[str, str]:
    rules = yaml.safe_load(RULES.read_text())
    return {rule["alert"]: rule["expr"] for group in rules["groups"] for rule in group["rules"]}


def dashboard_expressions() -> dict[str, str]:
    dashboard = json.loads(DASHBOARD.read_text())
    found = {
        f"{panel['title']} {target['refId']}": target["expr"]
        for panel in dashboard["panels"]
        for target in panel.get("targets", [])
    }
    for variable in dashboard["templating"]["list"]:
        found[f"variable {variable['name']}"] = variable["definition"]
    return found


def metrics_in(expr: str) -> set[str]:
    """The metric names an expression reads: its identifiers less label matchers, groupings, ranges, strings
    and PromQL's own words."""
    bare = re.sub(r'"[^"]*"', "", expr)
    bare = re.sub(r"\{[^}]*\}|\[[^\]]*\]", "", bare)
    bare = _GROUPING.sub("", bare)
    bare = re.sub(r"label_values\(\s*([\w:]+)\s*,\s*\w+\s*\)", r"\1", bare)
    return set(re.findall(r"[A-Za-z_:][\w:]*", bare)) - PROMQL_WORDS


def labels_in(expr: str) -> dict[str, set[str]]:
    """For each metric with a matcher (`name{label=...}`), the labels matched; under the key "" the labels
    grouped by (`by (...)`) and read by `label_values`, which any metric of the expression must carry."""
    found: dict[str, set[str]] = {"": set()}
    for name, matchers in _MATCHERS.findall(re.sub(r'"[^"]*"', '""', expr)):
        found.setdefault(name, set()).update(_LABEL.findall(matchers))
    for grouping in _GROUPING.findall(expr):
        found[""].update(label.strip() for label in grouping.split(",") if label.strip())
    found[""].update(re.findall(r"label_values\(\s*[\w:]+\s*,\s*(\w+)\s*\)", expr))
    return found


@pytest.fixture
def exported(client, health_world):  # noqa: F811 - the imported fixture
    return scrape(client)


@pytest.mark.parametrize("source", [rule_expressions, dashboard_expressions])
def test_every_metric_named_is_exported_with_the_labels_used(exported, source):
    expressions = source()
    assert expressions
    for where, expr in expressions.items():
        names = metrics_in(expr)
        assert names, f"{where}: no metric in {expr!r}"
        unknown = names - set(exported) - SCRAPE_SERIES
        assert not unknown, f"{where} reads {sorted(unknown)}, which /metrics does not export"
        labels = labels_in(expr)
        for name in names - SCRAPE_SERIES:
            carried = exported[name]
            if not carried:
                continue  # no sample in this world to read its labels from
            missing = (labels.get(name, set()) | labels[""]) - carried - {"job", "instance"}
            assert not missing, f"{where}: {name} has no label {sorted(missing)}"


def test_the_dashboard_shows_every_exported_metric(exported):
    shown = set().union(*(metrics_in(e) for e in dashboard_expressions().values()))
    assert set(exported) - {n for n in exported if n.endswith("_created")} <= shown, (
        "a metric /metrics exports has no panel in monitoring/grafana/handoff-console.json: "
        f"{sorted(set(exported) - shown)}"
    )


def test_the_metric_name_reader_sees_a_misspelt_metric():
    assert metrics_in('sum by (workspace) (handoff_needing_persons{state="x"}) > 0') == {
        "handoff_needing_persons"
    }
    assert labels_in('sum by (workflow, kind) (handoff_handoffs{state=~"a|b"})') == {
        "": {"workflow", "kind"},
        "handoff_handoffs": {"state"},
    }


def test_every_alert_has_a_severity_and_says_what_the_console_shows():
    rules = yaml.safe_load(RULES.read_text())
    for group in rules["groups"]:
        for rule in group["rules"]:
            assert rule["labels"]["severity"] in {"page", "ticket"}, rule["alert"]
            assert rule["annotations"]["summary"], rule["alert"]
            assert "Console: " in rule["annotations"]["description"], rule["alert"]
