#!/usr/bin/env bash
# run_lint.sh CHECK.py [SAMPLE-PROGRAM]: runs a lint check with the suite's
# Python, feeding it the sample program's output when one is given.
set -euo pipefail
py=${VOUCHER_LINT_PYTHON:-}
if [ -z "$py" ] || [ ! -x "$py" ]; then
  echo "Bail out! VOUCHER_LINT_PYTHON is not set: run through tests/run, which installs tests/lint/requirements.txt"
  exit 1
fi
if [ $# -ge 2 ]; then
  "$2" | "$py" "$1"
else
  "$py" "$1" </dev/null
fi
