#!/usr/bin/env python3
"""Validates deploy/k8s against the Kubernetes API schemas and the rules the
platform team relies on. TAP output; exit 1 on any failure.

The rules: every container has liveness and readiness probes and resource
requests and limits; credentials come from Secrets, not literals (nor the
ConfigMap); each daemon connects to PostgreSQL as its own role; the gateway
requires an API token; every pod runs with the RuntimeDefault seccomp profile
and without a service account token; a NetworkPolicy denies by default and
one more opens each Deployment's traffic, in and out; the writer has no more
replicas than voucher-events has partitions; the reconciler runs two
replicas; every Deployment has a PodDisruptionBudget.
"""
import glob
import os
import sys

import kubernetes_validate
import yaml

K8S_VERSION = "1.33.0"
PARTITIONS = 12
SECRET_VARS = {"VOUCHER_PG_DSN", "VOUCHER_GATEWAY_PG_DSN", "VOUCHER_WRITER_PG_DSN",
               "VOUCHER_RECONCILER_PG_DSN", "VOUCHER_REDIS_URL", "VOUCHER_ADMIN_TOKEN",
               "VOUCHER_API_TOKEN"}
# Each daemon's own PostgreSQL role (deploy/sql/008_daemon_roles.sql).
OWN_DSN = {"voucher-gateway": "VOUCHER_GATEWAY_PG_DSN", "voucher-writer": "VOUCHER_WRITER_PG_DSN",
           "voucher-reconciler": "VOUCHER_RECONCILER_PG_DSN"}

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
policies = [d for _, d in docs if d["kind"] == "NetworkPolicy"]


def selects(policy, labels):
    """Whether a NetworkPolicy's podSelector (matchLabels only) takes pods with these labels."""
    sel = policy["spec"].get("podSelector", {})
    if sel.get("matchExpressions"):
        return False
    return all(labels.get(k) == v for k, v in sel.get("matchLabels", {}).items())


for _, doc in docs:
    if doc["kind"] == "ConfigMap":
        check(not (set(doc.get("data", {})) & SECRET_VARS),
              f"ConfigMap {doc['metadata']['name']}: holds no credential")
check(any(not p["spec"].get("ingress") and not p["spec"].get("egress")
          and set(p["spec"].get("policyTypes", [])) == {"Ingress", "Egress"}
          and p["spec"]["podSelector"].get("matchLabels") == {"app.kubernetes.io/part-of": "voucher"}
          for p in policies),
      "a NetworkPolicy denies all traffic of part-of=voucher by default")
for name, d in deployments.items():
    spec = d["spec"]["template"]["spec"]
    labels = d["spec"]["template"]["metadata"].get("labels", {})
    check(spec.get("automountServiceAccountToken") is False,
          f"{name}: automountServiceAccountToken: false")
    check(spec.get("securityContext", {}).get("seccompProfile", {}).get("type") == "RuntimeDefault",
          f"{name}: seccompProfile RuntimeDefault")
    mine = [p for p in policies if selects(p, labels) and p["spec"].get("podSelector", {}).get(
        "matchLabels", {}).get("app.kubernetes.io/name") == name]
    check(any(p["spec"].get("ingress") for p in mine) and any(p["spec"].get("egress") for p in mine)
          and all(set(p["spec"].get("policyTypes", [])) == {"Ingress", "Egress"} for p in mine),
          f"{name}: a NetworkPolicy of its own opens its ingress and egress")
    for c in spec["containers"]:
        from_secret = {e["name"] for e in c.get("env", [])
                       if "secretKeyRef" in e.get("valueFrom", {})}
        check(OWN_DSN[name] in from_secret and "VOUCHER_PG_DSN" not in from_secret,
              f"{name}: connects to PostgreSQL as its own role ({OWN_DSN[name]} from a Secret)")
        if name == "voucher-gateway":
            check("VOUCHER_API_TOKEN" in from_secret,
                  f"{name}: requires an API token (VOUCHER_API_TOKEN from a Secret)")
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
