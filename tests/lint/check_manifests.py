#!/usr/bin/env python3
"""Validates deploy/k8s against the Kubernetes API schemas and the rules the
platform team relies on. TAP output; exit 1 on any failure.

The rules: every container has liveness and readiness probes and resource
requests and limits; credentials come from Secrets, not literals (nor the
ConfigMap); each daemon connects to PostgreSQL as its own role; the gateway
requires an API token; every pod runs with the RuntimeDefault seccomp profile
and without a service account token; a NetworkPolicy denies by default and
one more opens each Deployment's traffic, in and out; every ingress rule of
every NetworkPolicy names who may connect (a "from": a rule without one opens
its ports to every pod), the gateway's API port to the order service's pods
and the ingress controller's namespace, every admin port (9090) to the
monitoring namespace and, on the gateway, the admin tooling, nothing more;
every Ingress ends TLS (a tls entry with a Secret for each of its hosts), goes
only to the gateway's API Service, and comes from a namespace the gateway's
API rule admits; the writer has no more replicas than voucher-events has
partitions; the reconciler runs two replicas; every Deployment has a
PodDisruptionBudget.
"""
import glob
import os
import re
import sys

import kubernetes_validate
import yaml

K8S_VERSION = "1.33.0"
PARTITIONS = 12
SECRET_VARS = {"VOUCHER_PG_DSN", "VOUCHER_GATEWAY_PG_DSN", "VOUCHER_WRITER_PG_DSN",
               "VOUCHER_RECONCILER_PG_DSN", "VOUCHER_REDIS_URL", "VOUCHER_ADMIN_TOKEN",
               "VOUCHER_API_TOKEN"}
# Who may reach each daemon's ports: read from the runbook's table (deploy/README.md,
# "Kubernetes hardening": | port | open to |), so that the two cannot drift apart; the peers
# of each (daemon, port), as a NetworkPolicy's "from" names them.
ORDER_SERVICE = ("pod", "voucher.example/order-service", "true")
INGRESS_NAMESPACE = ("namespace", "kubernetes.io/metadata.name", "ingress-nginx")


def runbook_peers(path):
    """{(daemon, port): {peer}} from the runbook's "| port | open to |" table: a port cell names
    "gateway 8080 (API)" or several "writer 9090, reconciler 9090"; an open-to cell names pods
    labelled `k: "v"` and namespaces `n`."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    if "| port | open to |" not in lines:
        sys.exit(f"{path}: no \"| port | open to |\" table (Kubernetes hardening) to check against")
    start = lines.index("| port | open to |")
    table = {}
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        port_cell, open_cell = [c.strip() for c in line.strip("|").split("|")]
        peers = {("pod", k, v) for k, v in re.findall(r'labelled \**`([^`:]+): "([^"]+)"`', open_cell)}
        peers |= {("namespace", "kubernetes.io/metadata.name", n)
                  for n in re.findall(r"namespace `([^`]+)`", open_cell)}
        for daemon, port in re.findall(r"(gateway|writer|reconciler) (\d+)", port_cell):
            table[("voucher-" + daemon, int(port))] = peers
    return table


root = os.environ.get("VOUCHER_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
ALLOWED_PEERS = runbook_peers(os.path.join(root, "deploy", "README.md"))
# The gateway's API Service and port, where an Ingress may send requests.
API_SERVICE = ("voucher-gateway", "http")
# Each daemon's own PostgreSQL role (deploy/sql/008_daemon_roles.sql).
OWN_DSN = {"voucher-gateway": "VOUCHER_GATEWAY_PG_DSN", "voucher-writer": "VOUCHER_WRITER_PG_DSN",
           "voucher-reconciler": "VOUCHER_RECONCILER_PG_DSN"}

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



def peer(entry):
    """One entry of a "from" as (kind, label, value), or None for anything else (an ipBlock,
    matchExpressions, several labels, or a pod and namespace selector together)."""
    if set(entry) == {"podSelector"}:
        kind, sel = "pod", entry["podSelector"]
    elif set(entry) == {"namespaceSelector"}:
        kind, sel = "namespace", entry["namespaceSelector"]
    else:
        return None
    labels = sel.get("matchLabels", {})
    if sel.get("matchExpressions") or len(labels) != 1:
        return None
    (k, v), = labels.items()
    return (kind, k, v)


def shown(peers):
    """Peers as the runbook names them: "pods k=v", "namespace v", "something else"."""
    def one(p):
        if p is None:
            return "something else"
        return f"pods {p[1]}={p[2]}" if p[0] == "pod" else f"namespace {p[2]}"
    return ", ".join(sorted(one(p) for p in peers)) or "nobody"


# Every ingress rule names its peers, and those are the ones the runbook names for its port.
for p in policies:
    name = p["metadata"]["name"]
    target = p["spec"].get("podSelector", {}).get("matchLabels", {}).get("app.kubernetes.io/name")
    for i, rule in enumerate(p["spec"].get("ingress") or []):
        check(rule.get("from"), f"NetworkPolicy {name}: ingress rule {i + 1} names who may connect "
              "(a rule without 'from' admits every pod)")
        ports = [pt.get("port") for pt in rule.get("ports") or []]
        check(ports, f"NetworkPolicy {name}: ingress rule {i + 1} names its ports")
        for port in ports:
            allowed = ALLOWED_PEERS.get((target, port))
            got = {peer(e) for e in rule.get("from") or []}
            check(allowed is not None and got and got <= allowed,
                  f"NetworkPolicy {name}: port {port} admits only "
                  f"{shown(allowed) if allowed else 'nothing (no such port in the runbook)'}"
                  f" (this rule: {shown(got) if rule.get('from') else 'every pod, no from'})")
gateway_api_peers = {peer(e) for p in policies
                     if p["spec"].get("podSelector", {}).get("matchLabels", {}).get(
                         "app.kubernetes.io/name") == "voucher-gateway"
                     for rule in p["spec"].get("ingress") or []
                     if 8080 in [pt.get("port") for pt in rule.get("ports") or []]
                     for e in rule.get("from") or []}
check(ORDER_SERVICE in gateway_api_peers,
      "the gateway's API port admits the order service's pods (voucher.example/order-service)")

# Every Ingress ends TLS and leads only to the gateway's API port, from a namespace it admits.
for _, ing in [(n, d) for n, d in docs if d["kind"] == "Ingress"]:
    name = ing["metadata"]["name"]
    spec = ing["spec"]
    hosts = {r.get("host") for r in spec.get("rules") or []}
    tls_hosts = {h for t in spec.get("tls") or [] if t.get("secretName") for h in t.get("hosts") or []}
    check(hosts and None not in hosts and hosts <= tls_hosts,
          f"Ingress {name}: ends TLS (a tls entry with a secretName) for every host of its rules")
    backends = [(pth["backend"].get("service", {}).get("name"),
                 pth["backend"].get("service", {}).get("port", {}).get("name"))
                for r in spec.get("rules") or [] for pth in r.get("http", {}).get("paths", [])]
    if spec.get("defaultBackend"):
        backends.append((None, None))
    check(backends and all(b == API_SERVICE for b in backends),
          f"Ingress {name}: every path goes to the gateway's API Service ({API_SERVICE[0]}, "
          f"port {API_SERVICE[1]}), never its admin address")
    check(ing["metadata"].get("annotations", {}).get(
        "nginx.ingress.kubernetes.io/force-ssl-redirect") == "true",
        f"Ingress {name}: plain HTTP is redirected to HTTPS (force-ssl-redirect)")
    check(INGRESS_NAMESPACE in gateway_api_peers,
          f"Ingress {name}: the gateway's NetworkPolicy admits the ingress controller's namespace "
          f"({INGRESS_NAMESPACE[2]}) on the API port")

print(f"1..{len(results)}")
for i, (ok, what) in enumerate(results, 1):
    print(f"{'ok' if ok else 'not ok'} {i} - {what}")
sys.exit(0 if all(ok for ok, _ in results) else 1)
