#!/usr/bin/env bash
# A cipherd cluster on loopback: N replicas sharing one keyring file (made
# with `cipherd keyring new`) or, with KEYSTORE=postgres, one PostgreSQL
# keystore, each pinned to a different AEAD, behind HAProxy
# configured from deploy/haproxy/haproxy.cfg (only the addresses, the stats
# socket and the server list are rewritten; checks, retries and timeouts are
# the example's). With PROXY_PROTOCOL=true (the default) the example's
# commented send-proxy-v2 line is on and the replicas read the PROXY
# protocol header (proxy_protocol, trusted_proxies 127.0.0.1/32), so that
# their audit trails name the clients; PROXY_PROTOCOL=false runs the
# example as it is.
#
#   scripts/cluster.sh up [N]     start N replicas (default 3) and haproxy, print
#                                 the URLs, stop everything on Ctrl-C
#   scripts/cluster.sh scale      wrk, 64-byte JSON encrypt: one replica directly,
#                                 then through HAProxy in front of 1, 2 and 3
#
#   DUR=10s CONNS=32 THREADS=2 ROUNDS=3 PORT_BASE=18600 scripts/cluster.sh scale
#
#   KEYSTORE=postgres scripts/cluster.sh up 3
#                                 the replicas keep their keys in PostgreSQL: a
#                                 cluster of its own (initdb in the work directory,
#                                 on PORT_BASE+2, as user postgres when run as
#                                 root; Debian: apt-get install postgresql), or the
#                                 database at CL_PG_URL; keys are then created and
#                                 rotated through the API of any replica
#
# scripts/soak.sh sources this file for cl_init, cl_start_replicas,
# cl_start_haproxy, cl_wait_up and cl_stop. Needs go, haproxy, curl (and wrk
# for scale). Everything listens on 127.0.0.1 and is stopped on exit.
set -euo pipefail

CL_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PORT_BASE=${PORT_BASE:-18600}
CL_TOKEN=${CL_TOKEN:-cluster-token}
CL_KEY=orders
CL_AEADS=(aes-256-gcm chacha20-poly1305 aes-128-gcm)
CL_LB_ADDR=127.0.0.1:$PORT_BASE
CL_STATS_ADDR=127.0.0.1:$((PORT_BASE + 1))
CL_WORK=
declare -a CL_PIDS=() CL_ADDRS=()
CL_LB_PID=
KEYSTORE=${KEYSTORE:-keyring}
CL_PROXY_PROTOCOL=${PROXY_PROTOCOL:-true}
CL_PG_URL=${CL_PG_URL:-}
CL_PG_DATA=

# cl_ports_free: fail, naming it, if a port the cluster uses is taken
# (PORT_BASE, +1, +2 and +11 to +19), rather than later as a replica or
# HAProxy that will not start.
cl_ports_free() {
  local p taken
  for p in $PORT_BASE $((PORT_BASE + 1)) $((PORT_BASE + 2)) $(seq $((PORT_BASE + 11)) $((PORT_BASE + 19))); do
    taken=$(ss -Htln "sport = :$p" 2>/dev/null || true)
    if [ -n "$taken" ]; then
      echo "cluster: port $p is taken; stop what listens there or set PORT_BASE" >&2
      return 1
    fi
  done
}

# cl_init builds cipherd and makes the keyring, in a fresh work directory.
cl_init() {
  cl_ports_free
  CL_WORK=$(mktemp -d)
  (cd "$CL_ROOT" && go build -o "$CL_WORK/cipherd" ./cmd/cipherd)
  case $KEYSTORE in
  keyring) "$CL_WORK/cipherd" keyring new -o "$CL_WORK/keyring.json" "$CL_KEY" >/dev/null ;;
  postgres)
    head -c 32 /dev/urandom | base64 >"$CL_WORK/root.key"
    [ -n "$CL_PG_URL" ] || cl_pg_start
    ;;
  *) echo "cluster: KEYSTORE is keyring or postgres, not $KEYSTORE" >&2; return 2 ;;
  esac
}

# cl_pg_as runs a PostgreSQL binary as postgres when we are root (it
# refuses to run as root), else as ourselves.
cl_pg_as() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

# cl_pg_start runs a PostgreSQL cluster of its own in the work directory.
cl_pg_start() {
  local bin port=$((PORT_BASE + 2))
  bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
  [ -x "$bin/initdb" ] || { echo "cluster: KEYSTORE=postgres needs PostgreSQL (apt-get install postgresql) or CL_PG_URL" >&2; return 1; }
  CL_PG_DATA=$CL_WORK/pg/data
  mkdir -p "$CL_WORK/pg"
  chmod 711 "$CL_WORK"
  [ "$(id -u)" = 0 ] && chown postgres: "$CL_WORK/pg"
  cl_pg_as "$bin/initdb" -D "$CL_PG_DATA" -U cipherd --auth=trust -E UTF8 --no-sync >"$CL_WORK/pg/initdb.log"
  cl_pg_as "$bin/pg_ctl" -D "$CL_PG_DATA" -l "$CL_WORK/pg/postgres.log" -w \
    -o "-p $port -c listen_addresses=127.0.0.1 -c unix_socket_directories=$CL_WORK/pg" start >/dev/null
  CL_PG_BIN=$bin
  CL_PG_URL="postgres://cipherd@127.0.0.1:$port/postgres?sslmode=disable"
}

# cl_stop stops every process started here and removes the work directory
# (set CL_KEEP=1 to keep it: logs, CSV).
cl_stop() {
  local p
  for p in "${CL_PIDS[@]}" $CL_LB_PID; do kill "$p" 2>/dev/null || true; done
  for p in "${CL_PIDS[@]}" $CL_LB_PID; do wait "$p" 2>/dev/null || true; done
  CL_PIDS=() CL_LB_PID=
  if [ -n "$CL_PG_DATA" ]; then cl_pg_as "$CL_PG_BIN/pg_ctl" -D "$CL_PG_DATA" -m fast -w stop >/dev/null 2>&1 || true; CL_PG_DATA=; fi
  if [ -n "$CL_WORK" ] && [ "${CL_KEEP:-0}" != 1 ]; then rm -rf "$CL_WORK"; fi
}

# cl_wait_ready URL: until /readyz answers 200 (10 s at most).
cl_wait_ready() {
  local i
  for i in $(seq 200); do
    curl -sf -o /dev/null "$1/readyz" && return 0
    sleep 0.05
  done
  echo "cluster: $1 did not become ready" >&2
  return 1
}

# cl_start_replicas N: replicas 1..N on PORT_BASE+10+i, log level warn.
cl_start_replicas() {
  local n=$1 i addr
  for i in $(seq "$n"); do
    addr=127.0.0.1:$((PORT_BASE + 10 + i))
    printf 'version: 1\ndrain_delay: 5s\nshutdown_timeout: 30s\n' >"$CL_WORK/cipherd$i.yaml"
    if [ "$KEYSTORE" = postgres ]; then
      printf 'keystore: "%s"\nroot_key_file: %s\n' "$CL_PG_URL" "$CL_WORK/root.key" >>"$CL_WORK/cipherd$i.yaml"
    else
      printf 'keyring: %s\n' "$CL_WORK/keyring.json" >>"$CL_WORK/cipherd$i.yaml"
    fi
    CIPHERD_ADDR=$addr CIPHERD_DATA_DIR="$CL_WORK/data$i" \
      CIPHERD_ADMIN_TOKEN=$CL_TOKEN CIPHERD_AEAD=${CL_AEADS[$(((i - 1) % 3))]} CIPHERD_SKIP_BENCHMARK=1 \
      CIPHERD_PROXY_PROTOCOL=$CL_PROXY_PROTOCOL CIPHERD_TRUSTED_PROXIES=127.0.0.1/32 \
      "$CL_WORK/cipherd" serve -config "$CL_WORK/cipherd$i.yaml" -log-level warn >>"$CL_WORK/cipherd$i.log" 2>&1 &
    CL_PIDS+=($!)
    CL_ADDRS+=("$addr")
  done
  for addr in "${CL_ADDRS[@]}"; do cl_wait_ready "http://$addr"; done
  if [ "$KEYSTORE" = postgres ]; then
    # Through any replica: every other has it within milliseconds. 409: it
    # exists already (a second up on the same database).
    curl -s -o /dev/null -w '%{http_code}' -X POST -H "Authorization: Bearer $CL_TOKEN" \
      "http://${CL_ADDRS[0]}/v1/keys/$CL_KEY" | grep -qE '^(200|201|409)$' ||
      { echo "cluster: creating key $CL_KEY failed" >&2; return 1; }
  fi
}

# cl_render N: deploy/haproxy/haproxy.cfg with the first N replicas.
cl_render() {
  local n=$1 i servers=
  for i in $(seq "$n"); do servers+="    server cipherd$i ${CL_ADDRS[$((i - 1))]}\n"; done
  awk -v sock="$CL_WORK/haproxy.sock" -v bind="$CL_LB_ADDR" -v stats="$CL_STATS_ADDR" -v servers="$servers" -v proxy="$([ "$CL_PROXY_PROTOCOL" = true ] && echo 1 || echo 0)" '
    /^[^ \t#]/ { section = $0 }
    section == "global" && $1 == "stats" && $2 == "socket" { print "    stats socket " sock " mode 600 level admin"; next }
    section == "frontend cipherd" && $1 == "bind" { print "    bind " bind; next }
    section == "listen stats" && $1 == "bind" { print "    bind " stats; next }
    section == "backend cipherd" && $1 == "#default-server" && $2 == "send-proxy-v2" && proxy { sub(/#/, ""); print; next }
    section == "backend cipherd" && $1 == "server" { if (!done) printf "%s", servers; done = 1; next }
    { print }
  ' "$CL_ROOT/deploy/haproxy/haproxy.cfg"
}

# cl_start_haproxy N: (re)start haproxy in front of the first N replicas.
cl_start_haproxy() {
  if [ -n "$CL_LB_PID" ]; then kill "$CL_LB_PID"; wait "$CL_LB_PID" 2>/dev/null || true; fi
  cl_render "$1" >"$CL_WORK/haproxy.cfg"
  haproxy -q -c -f "$CL_WORK/haproxy.cfg"
  haproxy -db -f "$CL_WORK/haproxy.cfg" >>"$CL_WORK/haproxy.log" 2>&1 &
  CL_LB_PID=$!
  cl_wait_up "$1"
}

# cl_status: "name status" for every server, from the stats page's CSV.
cl_status() {
  curl -sf "http://$CL_STATS_ADDR/;csv" | awk -F, '
    NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
    $1 == "cipherd" && $2 != "BACKEND" && $2 != "FRONTEND" { print $2, $col["status"] }'
}

# cl_wait_up N: until HAProxy reports N servers UP (15 s at most).
cl_wait_up() {
  local i
  for i in $(seq 300); do
    [ "$(cl_status 2>/dev/null | grep -c ' UP$' || true)" = "$1" ] && return 0
    sleep 0.05
  done
  echo "cluster: HAProxy does not see $1 replicas UP:" >&2
  cl_status >&2 || true
  return 1
}

# cl_pid_of ADDR: the pid of the replica listening on ADDR.
cl_pid_of() {
  local i
  for i in "${!CL_ADDRS[@]}"; do [ "${CL_ADDRS[$i]}" = "$1" ] && echo "${CL_PIDS[$i]}"; done
}

cl_scale() {
  command -v wrk >/dev/null || { echo "scale needs wrk" >&2; exit 1; }
  local dur=${DUR:-10s} conns=${CONNS:-32} threads=${THREADS:-2} rounds=${ROUNDS:-3} r n url out
  local pt rps
  declare -A all=()
  pt=$(head -c 64 /dev/urandom | base64 -w0)
  cat >"$CL_WORK/encrypt.lua" <<LUA
wrk.method = "POST"
wrk.body = '{"plaintext":"$pt"}'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer $CL_TOKEN"
LUA
  cl_start_replicas 3
  echo "== 64-byte JSON encrypt, wrk -t$threads -c$conns -d$dur, $rounds rounds; $(nproc) CPUs shared by wrk, haproxy and the replicas"
  for r in $(seq "$rounds"); do
    for n in direct 1 2 3; do
      if [ "$n" = direct ]; then
        url="http://${CL_ADDRS[0]}"
      else
        cl_start_haproxy "$n"
        url="http://$CL_LB_ADDR"
      fi
      out=$(wrk -t"$threads" -c"$conns" -d"$dur" --latency -s "$CL_WORK/encrypt.lua" "$url/v1/encrypt/$CL_KEY")
      rps=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
      all[$n]+="$rps "
      printf 'round %d %-22s %10s req/s  p50 %-8s p90 %-8s p99 %-8s non-2xx %s  socket errors %s\n' "$r" \
        "$([ "$n" = direct ] && echo "1 replica, direct" || echo "$n behind haproxy")" "$rps" \
        "$(echo "$out" | awk '$1 == "50%" {print $2}')" "$(echo "$out" | awk '$1 == "90%" {print $2}')" \
        "$(echo "$out" | awk '$1 == "99%" {print $2}')" \
        "$(echo "$out" | awk '/Non-2xx/ {print $NF}' | grep . || echo 0)" \
        "$(echo "$out" | awk '/Socket errors/ {print $4 $5 $6 $7 $8 $9 $10 $11}' | grep . || echo 0)"
    done
  done
  for n in direct 1 2 3; do
    printf 'median %-21s %10s req/s\n' "$([ "$n" = direct ] && echo "1 replica, direct" || echo "$n behind haproxy")" \
      "$(echo "${all[$n]}" | tr ' ' '\n' | grep . | sort -g | awk '{a[NR] = $1} END {print (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2)}')"
  done
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  trap cl_stop EXIT
  case "${1:-up}" in
  up)
    n=${2:-3}
    cl_init
    cl_start_replicas "$n"
    cl_start_haproxy "$n"
    echo "cipherd through HAProxy: http://$CL_LB_ADDR   (token: $CL_TOKEN, key: $CL_KEY)"
    echo "replicas: ${CL_ADDRS[*]}"
    if [ "$KEYSTORE" = postgres ]; then
      echo "HAProxy stats: http://$CL_STATS_ADDR/   keystore: $CL_PG_URL   logs: $CL_WORK"
      echo "rotate: curl -X POST -H 'Authorization: Bearer $CL_TOKEN' http://$CL_LB_ADDR/v1/keys/$CL_KEY/rotate"
    else
      echo "HAProxy stats: http://$CL_STATS_ADDR/   keyring: $CL_WORK/keyring.json   logs: $CL_WORK"
      echo "rotate: $CL_WORK/cipherd keyring rotate -f $CL_WORK/keyring.json $CL_KEY"
    fi
    echo "Ctrl-C stops the cluster."
    wait
    ;;
  scale)
    cl_init
    cl_scale
    ;;
  *)
    sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
    exit 2
    ;;
  esac
fi
