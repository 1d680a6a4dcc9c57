#!/usr/bin/env python3
"""Validates deploy/k8s against the Kubernetes API schemas and the rules the
platform team relies on. TAP output; exit 1 on any failure.

The rules: every container has liveness and readiness probes and resource
requests and limits; credentials come from Secrets, not literals; the writer
has no more replicas than voucher-events has partitions; the reconciler runs
two replicas; every Deployment has a PodDisruptionBudget.
"""
import glob
import os
import sys

import kubernetes_validate
import yaml

K8S_VERSION = "1.33.0"
PARTITIONS = 12
SECRET_VARS = {"VOUCHER_PG_DSN", "VOUCHER_ADMIN_TOKEN"}

root = os.environ.get("VOUCHER_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
results = []


def check(ok, what):
    results.append((bool(ok), what))


docs = []
for path in sorted(glob.glob(os.path.join(root, "deploy", "k8s", "*.yaml"))):
    if os.path.basename(path) == "kustomization.yaml":
        with open(path) as f:
            listed = set(yaml.safe_load(f)["resources"])
        present = {os.path.basename(p) for p in glob.glob(os.path.join(root, "deploy", "k8s", "*.yaml"))}
        check(listed == present - {"kustomization.yaml"}, "kustomization.yaml lists every manifest")
        continue
    with open(path) as f:
        for doc in yaml.safe_load_all(f):
            if doc:
                docs.append((os.path.basename(path), doc))

for name, doc in docs:
    label = f"{name}: {doc['kind']} {doc['metadata']['name']}"
    try:
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
        check(True, f"{label} is valid Kubernetes {K8S_VERSION}")
    except kubernetes_validate.ValidationError as e:
        check(False, f"{label} is valid Kubernetes {K8S_VERSION}: {e.message} at {list(e.path)}")

deployments = {d["metadata"]["name"]: d for _, d in docs if d["kind"] == "Deployment"}
pdb_selectors = [d["spec"]["selector"]["matchLabels"] for _, d in docs if d["kind"] == "PodDisruptionBudget"]
check(set(deployments) == {"voucher-gateway", "voucher-writer", "voucher-reconciler"},
      "Deployments for gateway, writer and reconciler")
for name, d in deployments.items():
    spec = d["spec"]["template"]["spec"]
    for c in spec["containers"]:
        check("livenessProbe" in c and "readinessProbe" in c, f"{name}: liveness and readiness probes")
        res = c.get("resources", {})
        check("requests" in res and "limits" in res, f"{name}: resource requests and limits")
        literal = {e["name"] for e in c.get("env", []) if "value" in e}
        check(not (literal & SECRET_VARS), f"{name}: credentials come from a Secret")
    check(d["spec"]["selector"]["matchLabels"] in pdb_selectors, f"{name}: has a PodDisruptionBudget")
check(deployments["voucher-writer"]["spec"]["replicas"] <= PARTITIONS,
      f"writer replicas <= {PARTITIONS} partitions")
check(deployments["voucher-reconciler"]["spec"]["replicas"] == 2, "reconciler runs 2 replicas")

print(f"1..{len(results)}")
for i, (ok, what) in enumerate(results, 1):
    print(f"{'ok' if ok else 'not ok'} {i} - {what}")
sys.exit(0 if all(ok for ok, _ in results) else 1)
