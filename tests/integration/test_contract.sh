#!/usr/bin/env bash
# The HTTP contract both ways: schemathesis (tests/lint/requirements.txt, in the
# virtualenv tests/run makes) generates requests from proto/openapi.yaml and
# sends them to a real gateway: every answer must match the spec (status,
# headers, body schema), every body the schema allows must be accepted, every
# body it refuses must be refused, and no 5xx. Its stateful phase follows the
# spec's links (POST /vouchers -> reserve -> confirm, reserve -> release), so it
# reaches past 404s. Bounded: a fixed number of examples per operation and of
# steps per scenario (about a minute on two cores). tests/contract/ holds its
# settings and the hooks for rules JSON Schema cannot say (a window's end after
# its start). VOUCHER_CONTRACT_SEED picks another seed; VOUCHER_CONTRACT_EXAMPLES
# more examples.
source "$(dirname "$0")/lib.sh"

py=${VOUCHER_LINT_PYTHON:-}
if [ -z "$py" ] || ! "$py" -c 'import schemathesis' 2>/dev/null; then
  echo "1..0 # SKIP schemathesis is not installed: run through tests/run (tests/lint/requirements.txt)"
  tap_planned=0
  exit 0
fi
plan 7

token=$(new_token admin)
export VOUCHER_ADMIN_TOKEN=$token VOUCHER_GATEWAY_THREADS=2
start_gateway
start_writer
unset VOUCHER_ADMIN_TOKEN

seed=${VOUCHER_CONTRACT_SEED:-18}
contract=$VOUCHER_SOURCE_DIR/tests/contract
diag "schemathesis seed $seed (VOUCHER_CONTRACT_SEED)"
started=$(date +%s)
# unsupported_method is left out: the HTTP parser (common/vc_http.c) answers 400 to a
# method it cannot parse (QUERY) before any route is known; every method it
# parses gets 405 with Allow on a known path (tests/unit/test_gateway.c).
# /readyz and /metrics are served on the admin address (their own servers in
# the spec), which --url would replace: test_readiness and test_monitoring
# cover them there.
# The admin routes go to the admin address (tests/contract/hooks.py).
(cd "$scratch" && SCHEMATHESIS_HOOKS=hooks PYTHONPATH=$contract VOUCHER_CONTRACT_ADMIN_URL=$admin_url timeout 300 \
  "$(dirname "$py")/schemathesis" --config-file "$contract/schemathesis.toml" run \
  "$VOUCHER_SOURCE_DIR/proto/openapi.yaml" --url "$base_url" \
  -H "Authorization: Bearer $token" --generation-with-security-parameters false \
  --max-examples "${VOUCHER_CONTRACT_EXAMPLES:-50}" --workers 1 --seed "$seed" --no-color \
  --exclude-path /readyz --exclude-path /metrics --exclude-checks unsupported_method \
  --report har --report-dir "$scratch/report" \
  >"$scratch/run.txt" 2>&1)
rc=$?
took=$(($(date +%s) - started))
if [ "$rc" -ne 0 ]; then
  sed -n '/FAILURES/,$p' "$scratch/run.txt" | head -120 | sed 's/^/# /'
fi
is "$rc" 0 "schemathesis finds no mismatch between proto/openapi.yaml and the gateway"
ok "$([ "$took" -le 150 ]; echo $?)" "the run is bounded ($took s)"
grep -Eq 'API Links: +([0-9]+) covered / \1 selected / \1 total' "$scratch/run.txt"
links=$?
ok $links "the stateful phase followed every link of the spec"
[ "$links" = 0 ] || diag "$(grep -E 'API Links' "$scratch/run.txt")"

# What the run reached, from its HAR record: confirms and releases that worked.
reached() { # METHOD PATH-SUFFIX-REGEX STATUS
  "$py" - "$scratch"/report/*.json "$1" "$2" "$3" <<'EOF'
import json, re, sys
har, method, suffix, status = sys.argv[1], sys.argv[2], re.compile(sys.argv[3]), int(sys.argv[4])
entries = json.load(open(har))["log"]["entries"]
print(sum(1 for e in entries if e["request"]["method"] == method
          and suffix.search(e["request"]["url"].split("?")[0])
          and e["response"]["status"] == status))
EOF
}
n=$(reached POST '/reservations/[^/]+/confirm$' 200)
ok "$([ "${n:-0}" -gt 0 ]; echo $?)" "the run confirmed reservations it made ($n confirms answered 200)"
n=$(reached DELETE '/reservations/[^/]+$' 200)
ok "$([ "${n:-0}" -gt 0 ]; echo $?)" "the run released reservations it made ($n releases answered 200)"

# An answer schemathesis cannot reach: POST /vouchers with a campaign's one-time
# code (it cannot know one). Its body must be what the spec says that operation
# answers with that status, its error and reason among the spec's.
pfx=QC$(head -c 64 /dev/urandom | tr -dc '2-9A-HJ-NP-Z' | head -c 5)
http POST /campaigns "{\"name\":\"contract\",\"count\":1,\"prefix\":\"$pfx\",\"discountAmount\":100,\"startsAt\":\"2020-01-01T00:00:00Z\",\"endsAt\":\"2020-01-02T00:00:00Z\"}" \
  -H "Authorization: Bearer $token"
ccode=$(sql "SELECT code FROM campaign_code WHERE campaign_id = $(jq -r .id <<<"$body")")
http POST /vouchers "{\"code\":\"$ccode\",\"discountAmount\":100,\"minOrderAmount\":0,\"totalLimit\":1,\"perUserLimit\":1,\"startsAt\":\"2020-01-01T00:00:00Z\",\"endsAt\":\"2099-01-01T00:00:00Z\"}" \
  -H "Authorization: Bearer $token"
is "$status $(jq -r '.error + " " + (.reason // "-")' <<<"$body")" "409 EXISTS CAMPAIGN_CODE" \
  "POST /vouchers with a campaign's code: 409 EXISTS, reason CAMPAIGN_CODE"
verdict=$("$py" - "$VOUCHER_SOURCE_DIR/proto/openapi.yaml" /vouchers post "$status" "$body" <<'EOF'
import json, sys
import jsonschema, yaml
spec_path, path, method, status, body = sys.argv[1:6]
spec = yaml.safe_load(open(spec_path))
def resolve(node):
    if isinstance(node, dict):
        if "$ref" in node:
            target = spec
            for part in node["$ref"].lstrip("#/").split("/"):
                target = target[part.replace("~1", "/").replace("~0", "~")]
            return resolve(target)
        return {k: resolve(v) for k, v in node.items()}
    if isinstance(node, list):
        return [resolve(v) for v in node]
    return node
response = resolve(spec["paths"][path][method]["responses"].get(status))
if response is None:
    print(f"status {status} is not documented for {method.upper()} {path}")
    sys.exit()
schema = response["content"]["application/json"]["schema"]
errors = [e.message for e in jsonschema.Draft202012Validator(schema).iter_errors(json.loads(body))]
print("; ".join(errors) if errors else "valid")
EOF
)
is "$verdict" valid "and its body is valid against the spec's 409 of POST /vouchers (error and reason in its enums)"

# The run created vouchers with random codes, many of them running until 2099:
# their windows are moved into the past, so that the reconcilers of the tests
# after this one do not read them at every pass.
"$py" - "$scratch"/report/*.json >"$scratch/codes.txt" <<'EOF'
import json, sys
for e in json.load(open(sys.argv[1]))["log"]["entries"]:
    r = e["request"]
    if (r["method"] == "POST" and r["url"].split("?")[0].endswith("/vouchers")
            and e["response"]["status"] == 201):
        print(json.loads(e["response"]["content"]["text"])["code"])
EOF
while read -r c; do
  sql "UPDATE voucher SET starts_at = '2000-01-01Z', ends_at = '2000-01-02Z' WHERE code = '$c'" >/dev/null
done <"$scratch/codes.txt"
diag "$(wc -l <"$scratch/codes.txt") vouchers the run created were ended"
