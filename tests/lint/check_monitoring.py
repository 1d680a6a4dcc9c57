#!/usr/bin/env python3
"""Checks deploy/monitoring: the rules with promtool (check and unit tests),
the PrometheusRule against the rules file it is made from, each alert's tests
and runbook section, the PodMonitor against deploy/k8s, and every metric name
the rules and the dashboard query against the names the daemons export (read
from the C sources by metric_names.py): a renamed metric breaks this check,
not the dashboard. TAP output; exit 1 on any failure.
"""
import glob
import json
import os
import re
import shutil
import subprocess
import sys

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import metric_names  # noqa: E402

root = os.environ.get("VOUCHER_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
mon = os.path.join(root, "deploy", "monitoring")
RULES = os.path.join(mon, "voucher-rules.yml")
TESTS = os.path.join(mon, "tests", "rules_test.yml")
NORMAL_TEST = "a normal flash sale fires nothing"
results = []


def check(ok, what, detail=""):
    results.append((bool(ok), what + ("" if ok or not detail else f": {detail}")))


def load(path):
    with open(path) as f:
        return yaml.safe_load(f)


# promtool: the rules parse and their unit tests pass.
promtool = shutil.which("promtool")
check(promtool, "promtool is installed", "install Debian's prometheus (deploy/install)")
if promtool:
    for args, what in ((["check", "rules", RULES], "promtool check rules voucher-rules.yml"),
                       (["test", "rules", TESTS], "promtool test rules tests/rules_test.yml")):
        p = subprocess.run([promtool] + args, cwd=mon, capture_output=True, text=True)
        check(p.returncode == 0, what, (p.stdout + p.stderr).strip().replace("\n", "\n# "))

rules = load(RULES)
alerts = [r for g in rules["groups"] for r in g["rules"] if "alert" in r]
recorded = {r["record"] for g in rules["groups"] for r in g["rules"] if "record" in r}

# The PrometheusRule holds the same rules, and is what generate makes.
pr = load(os.path.join(mon, "prometheusrule.yaml"))
check(pr.get("kind") == "PrometheusRule" and pr.get("spec") == rules,
      "prometheusrule.yaml holds the rules of voucher-rules.yml", "run deploy/monitoring/generate")
gen = subprocess.run([os.path.join(mon, "generate"), "--stdout"], capture_output=True, text=True)
with open(os.path.join(mon, "prometheusrule.yaml")) as f:
    check(gen.returncode == 0 and gen.stdout == f.read(),
          "prometheusrule.yaml is what deploy/monitoring/generate makes", "run deploy/monitoring/generate")

# Every alert: a runbook section that exists, a test where it fires, and a place
# in the normal sale where it must not.
with open(os.path.join(root, "deploy", "README.md")) as f:
    readme = f.read()


def slug(heading):
    # GitHub's anchors: lower case, punctuation dropped, spaces to hyphens.
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


anchors = {slug(m.group(1)) for m in re.finditer(r"^#+\s+(.*)$", readme, re.M)}
tests = load(TESTS)["tests"]
fires = {a["alertname"] for t in tests for a in t.get("alert_rule_test", []) if a.get("exp_alerts")}
normal = [t for t in tests if t.get("name") == NORMAL_TEST]
quiet = {a["alertname"] for t in normal for a in t.get("alert_rule_test", []) if not a.get("exp_alerts")}
check(normal, f"tests/rules_test.yml has the test '{NORMAL_TEST}'")
for a in alerts:
    name = a["alert"]
    url = a.get("annotations", {}).get("runbook_url", "")
    m = re.fullmatch(r"deploy/README\.md#([\w-]+)", url)
    check(m and m.group(1) in anchors, f"{name}: runbook_url names a section of deploy/README.md",
          f"'{url}' (sections: {', '.join(sorted(anchors))})")
    check(a.get("labels", {}).get("severity") in ("page", "ticket"), f"{name}: severity page or ticket")
    check(name in fires, f"{name}: a test where it fires")
    check(name in quiet, f"{name}: checked not to fire on a normal flash sale")

# Metric names: every name a query selects is exported by a daemon, recorded by
# a rule, or one of Prometheus's own.
try:
    families = metric_names.exported_families()
    exported = metric_names.exported_series(families)
    check(len(families) >= 10, f"the daemons' metric names are read from the C sources ({len(families)} families)")
except ValueError as e:
    exported = set()
    check(False, "the daemons' metric names are read from the C sources", str(e))
known = exported | recorded | metric_names.BUILTIN


def check_names(where, expr):
    used = metric_names.used_in(expr)
    unknown = sorted(used - known)
    check(used and not unknown, f"{where}: queries metrics the daemons export",
          f"unknown {unknown} in {expr!r}" if unknown else f"no metric in {expr!r}")


for g in rules["groups"]:
    for r in g["rules"]:
        check_names(f"rule {r.get('alert') or r.get('record')}", r["expr"])

# deploy/run --monitoring prints a link to graphs of the demo sale.
with open(os.path.join(root, "deploy", "run")) as f:
    graph = re.search(r"^monitoring_graph\(\) \{\n(.*?)^\}", f.read(), re.M | re.S)
run_names = set(re.findall(r"\bvoucher[_:][a-z_:]*[a-z]", graph.group(1) if graph else ""))
check(run_names and not run_names - known, "deploy/run's graph queries metrics the daemons export",
      f"unknown {sorted(run_names - known)}")

with open(os.path.join(mon, "dashboard.json")) as f:
    dash = json.load(f)
ids = [p["id"] for p in dash["panels"]]
check(len(ids) == len(set(ids)), "dashboard.json: panel ids are unique")
for p in dash["panels"]:
    if p["type"] == "row":
        continue
    check(p.get("targets"), f"dashboard panel '{p['title']}': has queries")
    for t in p.get("targets", []):
        check_names(f"dashboard panel '{p['title']}' {t['refId']}", t["expr"])
    check(p.get("datasource", {}).get("uid") == "${datasource}",
          f"dashboard panel '{p['title']}': uses the datasource variable")

# The PodMonitor selects the three Deployments' pods and scrapes the ports
# their prometheus.io/port annotations name.
pm = load(os.path.join(mon, "podmonitor.yaml"))
deployments = []
for path in sorted(glob.glob(os.path.join(root, "deploy", "k8s", "*.yaml"))):
    with open(path) as f:
        deployments += [d for d in yaml.safe_load_all(f) if d and d.get("kind") == "Deployment"]
check(len(deployments) == 3, "deploy/k8s has the three Deployments")
selector = pm["spec"]["selector"]["matchLabels"]
endpoints = {e["port"]: e for e in pm["spec"]["podMetricsEndpoints"]}
for d in deployments:
    name = d["metadata"]["name"]
    tmpl = d["spec"]["template"]
    labels = tmpl["metadata"].get("labels", {})
    check(all(labels.get(k) == v for k, v in selector.items()), f"PodMonitor selects {name}'s pods")
    want = str(tmpl["metadata"].get("annotations", {}).get("prometheus.io/port"))
    ports = {str(p["containerPort"]): p.get("name") for c in tmpl["spec"]["containers"] for p in c.get("ports", [])}
    port = ports.get(want)
    check(port in endpoints and endpoints[port].get("path", "/metrics") == "/metrics",
          f"PodMonitor scrapes {name}'s metrics port {want} ({port})")
    rel = endpoints.get(port, {}).get("relabelings", [])
    daemon = next((re.sub(r"\$1", re.fullmatch(r["regex"], labels.get("app.kubernetes.io/name", "")).group(1), r["replacement"])
                   for r in rel if r.get("targetLabel") == "daemon"
                   and re.fullmatch(r["regex"], labels.get("app.kubernetes.io/name", ""))), None)
    check(daemon == name.replace("voucher-", ""), f"PodMonitor labels {name}'s targets daemon=\"{name.replace('voucher-', '')}\"",
          f"got {daemon!r}")

with open(os.path.join(mon, "kustomization.yaml")) as f:
    listed = set(yaml.safe_load(f)["resources"])
check(listed == {"podmonitor.yaml", "prometheusrule.yaml"}, "deploy/monitoring/kustomization.yaml lists the operator's objects")

print(f"1..{len(results)}")
for i, (ok, what) in enumerate(results, 1):
    print(f"{'ok' if ok else 'not ok'} {i} - {what}")
sys.exit(0 if all(ok for ok, _ in results) else 1)
