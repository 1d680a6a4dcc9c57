#!/usr/bin/env python3
"""The metric names the daemons export, read from their C sources, and the
metric names a PromQL expression uses. Standard library only: the lint suite
(check_monitoring.py) and the integration test test_monitoring.sh use it.

    metric_names.py exported    one exported series name a line (histograms
                                with _bucket, _sum and _count)
    metric_names.py families    one exported family name a line

A metric is made by vc_counter, vc_gauge or vc_histogram (common/vc_metrics.h)
whose first argument is a string literal, or a name defined in the same file
as a macro (#define NAME "...") or an array (NAME[] = "..."). Any other first
argument is an error: a name this script cannot see would escape the check.
"""
import glob
import os
import re
import sys

ROOT = os.environ.get("VOUCHER_SOURCE_DIR", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
DIRS = ("gateway", "writer", "reconciler", "common")
CALL = re.compile(r'\bvc_(counter|gauge|histogram)\s*\(\s*("(?:[^"\\]|\\.)*"|[A-Za-z_]\w*)')
# Prometheus's own series and the ones rule evaluation makes.
BUILTIN = {"up", "ALERTS", "ALERTS_FOR_STATE", "scrape_duration_seconds", "scrape_samples_scraped"}


def exported_families():
    """{name: kind} of every metric family made in the C sources; raises ValueError on a name it cannot read."""
    families = {}
    for d in DIRS:
        for path in sorted(glob.glob(os.path.join(ROOT, d, "**", "*.c"), recursive=True)):
            with open(path) as f:
                text = f.read()
            if os.path.basename(path) == "vc_metrics.c":
                continue  # the registry itself: its parameters, not metrics
            for kind, arg in CALL.findall(text):
                if arg.startswith('"'):
                    name = arg[1:-1]
                else:
                    m = (re.search(r'#define\s+%s\s+"([^"]+)"' % arg, text)
                         or re.search(r'\b%s\s*\[\s*\]\s*=\s*"([^"]+)"' % arg, text))
                    if not m:
                        raise ValueError(f"{os.path.relpath(path, ROOT)}: vc_{kind}({arg}, ...): "
                                         "cannot tell the metric's name")
                    name = m.group(1)
                if not re.fullmatch(r"[a-zA-Z_:][a-zA-Z0-9_:]*", name):
                    raise ValueError(f"{os.path.relpath(path, ROOT)}: '{name}' is not a metric name")
                families[name] = kind
    return families


def exported_series(families):
    names = set()
    for name, kind in families.items():
        if kind == "histogram":
            names |= {name + "_bucket", name + "_sum", name + "_count"}
        else:
            names.add(name)
    return names


# Words of PromQL that are not metric names when not followed by "(".
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless",
            "offset", "bool", "inf", "nan", "atan2"}


def used_in(expr):
    """The metric names an expression selects (Grafana's $variables allowed)."""
    e = re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`', '""', expr)  # strings
    e = re.sub(r"\{[^}]*\}", " ", e)  # label matchers
    e = re.sub(r"\[[^\]]*\]", " ", e)  # ranges and subqueries
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", e)  # label lists
    e = re.sub(r"\$\{?\w+\}?", " ", e)  # Grafana variables
    e = re.sub(r"\b\d+(\.\d+)?([eE][+-]?\d+)?\b", " ", e)  # numbers
    names = set()
    for m in re.finditer(r"[a-zA-Z_:][a-zA-Z0-9_:]*", e):
        word = m.group(0)
        if re.match(r"\s*\(", e[m.end():]) or word.lower() in KEYWORDS:
            continue  # a function, an aggregation or a keyword
        names.add(word)
    return names


if __name__ == "__main__":
    fams = exported_families()
    what = sys.argv[1] if len(sys.argv) > 1 else "exported"
    if what == "families":
        print("\n".join(sorted(fams)))
    elif what == "exported":
        print("\n".join(sorted(exported_series(fams))))
    else:
        sys.exit("usage: metric_names.py exported|families")
