# Starting and stopping the three daemons against a stack, for deploy/run and
# the integration tests. Source it after `eval "$(deploy/stack env)"`.
#
#   daemon_start NAME BINARY [ARGS...]   start in the background, pid and log in the stack dir
#   daemon_stop NAME [SIGNAL]            stop (TERM by default), wait, then KILL
#   daemon_running NAME
#   wait_http_ok URL SECONDS             until URL answers 200

daemon_dir() { echo "${VOUCHER_STACK_DIR:?run eval \"\$(deploy/stack env)\" first}/run"; }

daemon_running() {
  local pidfile
  pidfile="$(daemon_dir)/$1.pid"
  [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null
}

daemon_start() {
  local name=$1 dir log
  shift
  dir=$(daemon_dir)
  mkdir -p "$dir" "$VOUCHER_STACK_DIR/logs"
  log="$VOUCHER_STACK_DIR/logs/$name.log"
  if daemon_running "$name"; then
    return 0
  fi
  nohup "$@" >>"$log" 2>&1 </dev/null &
  echo $! >"$dir/$name.pid"
}

daemon_stop() {
  local name=$1 sig=${2:-TERM} pidfile pid i
  pidfile="$(daemon_dir)/$name.pid"
  [ -f "$pidfile" ] || return 0
  pid=$(cat "$pidfile")
  if kill -0 "$pid" 2>/dev/null; then
    kill -s "$sig" "$pid" 2>/dev/null || true
    for ((i = 0; i < 300; i++)); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null
  fi
  # Reap it when it is our child, so its exit status is not left as a zombie.
  wait "$pid" 2>/dev/null || true
  rm -f "$pidfile"
}

wait_http_ok() {
  local url=$1 secs=$2 i
  for ((i = 0; i < secs * 10; i++)); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 1 "$url" 2>/dev/null)" = 200 ] && return 0
    sleep 0.1
  done
  return 1
}
