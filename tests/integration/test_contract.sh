#!/usr/bin/env bash
# The HTTP contract both ways: schemathesis (tests/lint/requirements.txt, in the
# virtualenv tests/run makes) generates requests from proto/openapi.yaml and
# sends them to a real gateway, in every phase (the spec's examples, the
# coverage of its bounds, fuzzing, stateful): every answer must match the spec
# (status, headers, body schema), every body the schema allows must be
# accepted, every body it refuses must be refused, no 5xx, and no warning
# either (tests/contract/schemathesis.toml: a "schema validation mismatch",
# the server refusing most of what the schema allows, fails the run). Its
# stateful phase follows the spec's links (POST /vouchers -> reserve ->
# confirm, reserve -> release), so it reaches past 404s. A new seed every run,
# printed; bounded by a number of examples per operation and of steps per
# scenario (about 25 s on two cores). tests/contract/ holds its settings and
# the hooks for rules JSON Schema cannot say (a window's end after its start).
# VOUCHER_CONTRACT_SEED runs a seed again; VOUCHER_CONTRACT_EXAMPLES takes more
# examples. Then error bodies that quote input are checked for valid UTF-8.
source "$(dirname "$0")/lib.sh"

py=${VOUCHER_LINT_PYTHON:-}
if [ -z "$py" ] || ! "$py" -c 'import schemathesis' 2>/dev/null; then
  echo "1..0 # SKIP schemathesis is not installed: run through tests/run (tests/lint/requirements.txt)"
  tap_planned=0
  exit 0
fi
plan 19

token=$(new_token admin)
export VOUCHER_ADMIN_TOKEN=$token VOUCHER_GATEWAY_THREADS=2
start_gateway
start_writer
unset VOUCHER_ADMIN_TOKEN

# A voucher that runs now, for the quotes and reservations the hooks send it
# (tests/contract/hooks.py, before_call): no minimum, limits that never run out.
running=CT$(head -c 1024 /dev/urandom | tr -dc 'A-Z0-9' | head -c 12)
limits='"totalLimit":2147483647,"perUserLimit":2147483647'
http POST /vouchers "{\"code\":\"$running\",\"mode\":\"flash\",\"discountPercent\":10,\"minOrderAmount\":0,$limits,
  \"startsAt\":\"2020-01-01T00:00:00Z\",\"endsAt\":\"2099-01-01T00:00:00Z\"}" \
  -H "Authorization: Bearer $token"
if [ "$status" != 201 ]; then
  echo "Bail out! the running voucher was not created: $status $body"
  exit 1
fi

# A new seed every run (printed, to run it again): a fixed one tried the same bodies forever.
seed=${VOUCHER_CONTRACT_SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}
contract=$VOUCHER_SOURCE_DIR/tests/contract
diag "schemathesis seed $seed (VOUCHER_CONTRACT_SEED)"
started=$(date +%s)
# unsupported_method is left out: the HTTP parser (common/vc_http.c) answers 400 to a
# method it cannot parse (QUERY) before any route is known; every method it
# parses gets 405 with Allow on a known path (tests/unit/test_gateway.c).
# The routes the spec gives servers of their own (the admin routes, /readyz, /metrics)
# go to the admin address (tests/contract/hooks.py); --url replaces only the top one.
# Every phase runs: the spec's examples, the coverage of its bounds, fuzzing, stateful.
(cd "$scratch" && SCHEMATHESIS_HOOKS=hooks PYTHONPATH=$contract \
  VOUCHER_CONTRACT_ADMIN_URL=$admin_url \
  VOUCHER_CONTRACT_CODE=$running timeout 300 \
  "$(dirname "$py")/schemathesis" --config-file "$contract/schemathesis.toml" run \
  "$VOUCHER_SOURCE_DIR/proto/openapi.yaml" --url "$base_url" \
  -H "Authorization: Bearer $token" --generation-with-security-parameters false \
  --max-examples "${VOUCHER_CONTRACT_EXAMPLES:-50}" --workers 1 --seed "$seed" --no-color \
  --phases examples,coverage,fuzzing,stateful --exclude-checks unsupported_method \
  --report har --report-dir "$scratch/report" \
  >"$scratch/run.txt" 2>&1)
rc=$?
took=$(($(date +%s) - started))
# VOUCHER_CONTRACT_KEEP=DIR keeps the run's output and its HAR record there, to read a failure.
if [ -n "${VOUCHER_CONTRACT_KEEP:-}" ]; then
  mkdir -p "$VOUCHER_CONTRACT_KEEP"
  cp -r "$scratch/run.txt" "$scratch/report" "$VOUCHER_CONTRACT_KEEP"
fi
if [ "$rc" -ne 0 ]; then
  sed -n '/\(FAILURES\|WARNINGS\) ==/,$p' "$scratch/run.txt" | head -120 | sed 's/^/# /'
fi
is "$rc" 0 \
  "schemathesis finds no mismatch between proto/openapi.yaml and the gateway (no failure, no warning)"
# About 25 s on two idle cores; the margin is for a machine that builds meanwhile.
ok "$([ "$took" -le 90 ]; echo $?)" "the run is bounded ($took s)"
phases=$(grep -cE '^ +✅ (Examples|Coverage|Fuzzing|Stateful)$' "$scratch/run.txt")
is "$phases" 4 "every phase ran and passed: examples, coverage, fuzzing, stateful"
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
pfx=QC$(random_symbols 5)
http POST /campaigns "{\"name\":\"contract\",\"count\":1,\"prefix\":\"$pfx\",\"discountAmount\":100,\"startsAt\":\"2020-01-01T00:00:00Z\",\"endsAt\":\"2020-01-02T00:00:00Z\"}" \
  -H "Authorization: Bearer $token"
[ "$status" = 201 ] || diag "POST /campaigns for the campaign's code answered $status: $body"
ccode=$(sql "SELECT code FROM campaign_code WHERE campaign_id = $(jq -r .id <<<"$body")")
http POST /vouchers "{\"code\":\"$ccode\",\"mode\":\"flash\",\"discountAmount\":100,\"minOrderAmount\":0,\"totalLimit\":1,\"perUserLimit\":1,\"startsAt\":\"2020-01-01T00:00:00Z\",\"endsAt\":\"2099-01-01T00:00:00Z\"}" \
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

# An error body is valid UTF-8 JSON whatever it quotes (issue 45): a campaign
# prefix "Ä" was quoted as its first byte alone (' \303'), and an unknown field
# of multibyte characters was cut at 64 bytes inside a character.
utf8_json() { # BODY: "valid" when it is UTF-8 and JSON, else why not
  printf '%s' "$1" | "$py" -c '
import json, sys
raw = sys.stdin.buffer.read()
try:
    print("valid" if isinstance(json.loads(raw.decode("utf-8", errors="strict")), dict) else "no object")
except (UnicodeDecodeError, ValueError) as e:
    print(type(e).__name__, e)'
}
http POST /campaigns '{"name":"utf8","count":1,"prefix":"Ä","discountAmount":1,"startsAt":"2020-01-01T00:00:00Z","endsAt":"2020-01-02T00:00:00Z"}' \
  -H "Authorization: Bearer $token"
is "$status $(utf8_json "$body") $(jq -r .detail <<<"$body" | grep -o "'Ä' is not one")" \
  "422 valid 'Ä' is not one" "POST /campaigns, prefix Ä: 422, valid UTF-8 JSON, the symbol quoted whole"
key=k$(printf 'Ä%.0s' $(seq 40))
http POST "/vouchers/$running/quote" "{\"customerId\":1,\"orderAmount\":1,\"$key\":1}"
is "$status $(utf8_json "$body")" "400 valid" \
  "an unknown field of 81 bytes of Ä, quoted in 64: 400, valid UTF-8 JSON"

# The order service's path through a client generated from the spec by a
# maintained generator (openapi-python-client): a spec it refuses, or one it
# reads only in part (a warning: a body typed Any, an answer it cannot parse),
# fails here. tests/contract/client_drive.py drives quote, reserve, the retry,
# confirm, cancel and an error answer, each parsed into the generated models.
gen_out=$(cd "$scratch" && "$(dirname "$py")/openapi-python-client" generate \
  --path "$VOUCHER_SOURCE_DIR/proto/openapi.yaml" --meta none \
  --output-path "$scratch/client/voucher_client" \
  --config "$contract/openapi-python-client.yaml" 2>&1)
gen_rc=$?
gen_ok=$([ "$gen_rc" = 0 ] && ! grep -qi 'warning\|error' <<<"$gen_out"; echo $?)
ok "$gen_ok" "openapi-python-client generates a client from proto/openapi.yaml, without a warning"
[ "$gen_ok" = 0 ] || diag "$gen_out"
gen_code=GEN$(head -c 1024 /dev/urandom | tr -dc 'A-Z0-9' | head -c 12)
mapfile -t drive < <("$py" "$contract/client_drive.py" "$scratch/client" "$base_url" "$admin_url" \
  "$token" "$gen_code" 2>&1)
for i in $(seq 0 7); do
  line=${drive[$i]:-"1 check $((i + 1)) of the generated client did not run"}
  ok "$([ "${line%% *}" = 0 ]; echo $?)" "generated client: ${line#* }"
done
[ "${#drive[@]}" -le 8 ] || diag "$(printf '%s\n' "${drive[@]:8}")"

# The run created and changed vouchers with random codes, many of them running
# until 2099: their windows are moved into the past, so that the reconcilers of
# the tests after this one do not read them at every pass (and a later run does
# not find one running whose keys a PATCH made expire).
"$py" - "$scratch"/report/*.json >"$scratch/codes.txt" <<'EOF'
import json, sys
for e in json.load(open(sys.argv[1]))["log"]["entries"]:
    r = e["request"]
    path = r["url"].split("?")[0]
    if ((r["method"] == "POST" and path.endswith("/vouchers") and e["response"]["status"] == 201)
            or (r["method"] == "PATCH" and e["response"]["status"] == 200)):
        print(json.loads(e["response"]["content"]["text"])["code"])
EOF
while read -r c; do
  sql "UPDATE voucher SET starts_at = '2000-01-01Z', ends_at = '2000-01-02Z' WHERE code = '$c'" >/dev/null
done < <(cat "$scratch/codes.txt"; echo "$running"; echo "$gen_code")
diag "$(sort -u "$scratch/codes.txt" | wc -l) vouchers the run created or changed were ended"
