# The workload of one chaos scenario, and what records it: a flash sale fired
# by vc-load, the confirms and cancels an order service would send for some of
# its 201s, and PostgreSQL's used_count sampled all along. Sourced by
# tests/chaos/run, which sets $dir (the scenario's folder), $code, $seed and
# the profile's numbers.

now_ms() { date +%s%3N; }

# SQL on the stack's database, unaligned; fails quietly when PostgreSQL is down.
sql() { PGCONNECT_TIMEOUT=3 psql -X -q -tA -v ON_ERROR_STOP=1 "$VOUCHER_PG_DSN" -c "$1" 2>/dev/null; }

rcli() {
  local hostport=${VOUCHER_REDIS_URL#redis://}
  hostport=${hostport%%/*}
  redis-cli -h "${hostport%:*}" -p "${hostport#*:}" "$@"
}

# A voucher of its own for each scenario, valid from a minute ago for a day: a
# flash one, or (direct-outage's second) a direct one.
voucher_create() { # CODE LIMIT PER_CUSTOMER [MODE]
  sql "INSERT INTO voucher (code, mode, discount_amount, min_order_amount, total_limit, per_user_limit, starts_at, ends_at)
       VALUES ('$1', '${4:-flash}', 100000, 0, $2, $3, now() - interval '1 minute', now() + interval '1 day')" >/dev/null
}

# Moves a checked scenario's voucher out of the reconciler's window (it looks
# at vouchers that ended less than a day ago), so a voucher an earlier
# scenario left drifted does not decide the verdict of the next one.
voucher_retire() { # CODE
  sql "UPDATE voucher SET starts_at = now() - interval '3 days', ends_at = now() - interval '2 days'
       WHERE code = '$1'" >/dev/null
}

# ---------------------------------------------------------------- sampler

# Samples used_count every 200 ms through one psql session until
# $dir/sampler.stop exists; starts a new session when PostgreSQL went away.
sampler() {
  local q="SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint, used_count, total_limit FROM voucher WHERE code = '$code';"
  while [ ! -f "$dir/sampler.stop" ]; do
    {
      while [ ! -f "$dir/sampler.stop" ]; do
        echo "$q"
        sleep 0.2
      done
    } | PGCONNECT_TIMEOUT=2 psql -X -qAt -F $'\t' "$VOUCHER_PG_DSN" >>"$dir/samples.tsv" 2>/dev/null
    sleep 0.2
  done
}

sampler_start() { : >"$dir/samples.tsv"; rm -f "$dir/sampler.stop"; sampler & sampler_pid=$!; }
sampler_stop() { touch "$dir/sampler.stop"; wait "$sampler_pid" 2>/dev/null; }

# ---------------------------------------------------------------- the sale

# The flash sale: vc-load in open loop, each attempt from a customer drawn
# with the scenario's seed, the same orderId retried after a timeout, a broken
# connection or a 503. With two gateways (base_urls), one vc-load per gateway
# fires its share of the attempts at the same total rate, orderIds apart
# (CODE-g1-..., CODE-g2-...), customers from the same pool (so the per-customer
# limit is tested across gateways); their histories are joined into
# attempts.tsv at the end. Touches $dir/load.done when it is over.
load_run() {
  local n=${#base_urls[@]} i rc=0 pids=() share
  if [ "$n" = 1 ]; then
    load_one "$base_url" "$code-" "$p_attempts" "$p_rate" "$p_connections" "$seed" "$dir/attempts.tsv" "$dir/load"
    rc=$?
  else
    for ((i = 1; i <= n; i++)); do
      share=$((p_attempts / n + (i <= p_attempts % n ? 1 : 0)))
      load_one "${base_urls[i - 1]}" "$code-g$i-" "$share" $((p_rate / n)) $((p_connections / n)) \
        $((seed + i)) "$dir/attempts-$i.tsv" "$dir/load-$i" &
      pids+=($!)
    done
    for i in "${pids[@]}"; do wait "$i" || rc=$?; done
    cat "$dir"/attempts-[0-9].tsv >"$dir/attempts.tsv"
    cat "$dir"/load-[0-9].err >"$dir/load.err"
    jq -s '{byStatus: (map(.byStatus // {}) | reduce .[] as $b ({}; reduce ($b | to_entries[]) as $e (.; .[$e.key] += $e.value)))}' \
      "$dir"/load-[0-9].json >"$dir/load.json" 2>/dev/null
  fi
  echo "$rc" >"$dir/load.rc"
  touch "$dir/load.done"
}

# One vc-load: URL ORDER_PREFIX ATTEMPTS RATE CONNECTIONS SEED OUT_TSV OUT_BASE.
load_one() {
  "$bin_load" --addr "${1#http://}" --code "$code" --order-prefix "$2" \
    --attempts "$3" --customers "$p_customers" --random-customers --seed "$6" \
    --rate "$4" --connections "$5" --timeout "$p_timeout" \
    --retries "$p_retries" --connect-timeout 30s --amount 500000 \
    --out "$7" --json >"$8.json" 2>"$8.err"
}

# ---------------------------------------------------------------- the order service

# ops_send confirm|release ORDER...: one request per order, many in flight
# (curl --parallel); an order whose answer is unknown (no answer, 5xx) is
# asked again, as the API says, up to $p_op_tries times. Appends
# "op orderId status tries" to $dir/ops.tsv and prints the orders answered 200.
ops_send() {
  local op=$1 try=1 status url order
  shift
  local -a todo=("$@") again
  local cfg=$dir/curl-$op.cfg
  while [ ${#todo[@]} -gt 0 ]; do
    {
      echo "max-time = 3"
      if [ "$op" = confirm ]; then echo 'request = "POST"'; else echo 'request = "DELETE"'; fi
      for order in "${todo[@]}"; do
        if [ "$op" = confirm ]; then
          echo "url = \"$base_url/vouchers/$code/reservations/$order/confirm\""
        else
          echo "url = \"$base_url/vouchers/$code/reservations/$order\""
        fi
        echo 'output = "/dev/null"'
      done
    } >"$cfg"
    again=()
    while IFS=$'\t' read -r status url; do
      order=${url#*/reservations/}
      order=${order%/confirm}
      if [[ $status != [24]?? ]] && [ "$try" -lt "$p_op_tries" ]; then
        again+=("$order")
        continue
      fi
      printf '%s\t%s\t%s\t%s\n' "$op" "$order" "$status" "$try" >>"$dir/ops.tsv"
      [ "$status" = 200 ] && echo "$order"
    done < <(curl -s --parallel --parallel-max 8 -K "$cfg" -w '%{http_code}\t%{url}\n' 2>/dev/null)
    todo=("${again[@]}")
    try=$((try + 1))
    [ ${#todo[@]} -gt 0 ] && sleep 0.3
  done
}

# What the order service does with a 201, chosen from the attempt's index and
# the seed: confirm (35 %), cancel (20 %), confirm and later cancel (10 %), or
# leave the hold to expire (35 %). Prints "op orderId" lines.
ops_pick() { # FILE of complete vc-load lines
  awk -F'\t' -v seed="$seed" '$1 !~ /^#/ && $4 == "201" {
    b = ($1 * 7919 + seed) % 100
    if (b < 35) print "confirm", $2
    else if (b < 55) print "release", $2
    else if (b < 65) print "both", $2
  }' "$1"
}

# Runs beside the sale: reads the 201s vc-load has written so far (whole
# lines only) and sends their confirms and cancels, until $dir/load.done
# exists and the last lines are handled. With two gateways, the operations on
# a 201 from one gateway go to the other one.
client_loop() {
  local last=0 n op order i nfiles=${#base_urls[@]} f
  local -a confirms releases boths confirmed files offs
  : >"$dir/ops.tsv"
  if [ "$nfiles" = 1 ]; then
    files=("$dir/attempts.tsv")
  else
    for ((i = 1; i <= nfiles; i++)); do files+=("$dir/attempts-$i.tsv"); done
  fi
  for ((i = 0; i < nfiles; i++)); do offs[i]=0; done
  while :; do
    [ -f "$dir/load.done" ] && last=1
    for ((i = 0; i < nfiles; i++)); do
      f=${files[i]}
      local base_url=${base_urls[(i + 1) % nfiles]}
      n=0
      [ -f "$f" ] && n=$(tail -c +$((offs[i] + 1)) "$f" | wc -l)
      [ "$n" -gt 0 ] || continue
      tail -c +$((offs[i] + 1)) "$f" | head -n "$n" >"$dir/chunk.tsv"
      offs[i]=$((offs[i] + $(stat -c %s "$dir/chunk.tsv")))
      confirms=() releases=() boths=()
      while read -r op order; do
        case $op in
          confirm) confirms+=("$order") ;;
          release) releases+=("$order") ;;
          both) boths+=("$order") ;;
        esac
      done < <(ops_pick "$dir/chunk.tsv")
      [ $((${#confirms[@]} + ${#boths[@]})) -gt 0 ] &&
        mapfile -t confirmed < <(ops_send confirm "${confirms[@]}" "${boths[@]}")
      # Cancel the "both" orders only once their confirm was answered.
      local -A was_confirmed=()
      for order in "${confirmed[@]}"; do was_confirmed[$order]=1; done
      for order in "${boths[@]}"; do
        [ -n "${was_confirmed[$order]:-}" ] && releases+=("$order")
      done
      [ ${#releases[@]} -gt 0 ] && ops_send release "${releases[@]}" >/dev/null
      confirmed=()
    done
    [ "$last" = 1 ] && break
    sleep 0.3
  done
}
