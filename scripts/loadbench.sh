#!/usr/bin/env bash
# Loopback load benchmark: cipherd's full path against a bare fiber handler
# doing the same cryptographic work (internal/baseline), same tool, same run,
# rounds interleaved; its streams also against a net/http server that copies
# the request body back (internal/baseline -echo), the ceiling of a Go server.
# Everything listens on 127.0.0.1 and stops by itself.
#
#   scripts/loadbench.sh            # JSON 64-byte encrypt with wrk, then streams with curl
#   DUR=5s ROUNDS=3 CONNS=32 STREAM_MB=1024 WARMUP=3s scripts/loadbench.sh
#
# Needs wrk and curl (apt-get install wrk curl). Prints medians and ratios.
# cipherd logs at info level, one access (or audit) line per request: the
# access log is part of the path being measured. By default its output goes
# into a pipe that another process drains, as a container's output goes to
# its runtime's log driver; LOG_TO=file writes it to a file instead, which on
# a VM costs the kernel more per line (the page cache grows by the log's
# size, page by page). STREAM_MB=0 skips the streaming rounds.
# CHART_DIR=docs/img also writes the medians as tables and SVG charts
# (internal/benchchart).
#
# VS=postgres compares cipherd on its file keystore with cipherd on a
# PostgreSQL keystore instead of the baseline (JSON rounds only): PG_DSN
# names the database, or the script runs a throwaway cluster with Debian's
# postgresql (initdb on a free port, as the user postgres when run as root),
# on the clients' CPUs.
#
# With two CPUs or more, both servers run on the last CPU and the clients on
# the others (taskset), as in a load test from other machines: the servers
# get GOMAXPROCS=1 and no client competes for their core, so that CPU per
# request measures the request's work. PIN=0 lets everything share all CPUs:
# then each server's CPU per request also counts what the Go scheduler spends
# reacting to wrk taking its cores (idle processors woken and put back to
# sleep, sysmon polling every 20 µs), 1.5–3 µs per request on this 2-core
# VM and the largest source of spread between runs (docs/BENCHMARKS.md).
set -euo pipefail
cd "$(dirname "$0")/.."
DUR=${DUR:-10s}
ROUNDS=${ROUNDS:-3}
CONNS=${CONNS:-32}
STREAM_MB=${STREAM_MB:-1024}
TOKEN=loadbench-token
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

go build -o "$work/cipherd" ./cmd/cipherd
go build -o "$work/baseline" ./internal/baseline
VS=${VS:-baseline}
case $VS in
baseline) other=baseline ;;
postgres) other=cipherd-pg; STREAM_MB=0 ;;
*) echo "VS=baseline or VS=postgres" >&2; exit 2 ;;
esac

srv=() cli=()
n=$(nproc)
PIN=${PIN:-$([ "$n" -ge 2 ] && echo 1 || echo 0)}
if [ "$PIN" = 1 ]; then
  [ "$n" -ge 2 ] || { echo "PIN=1 needs 2 CPUs or more" >&2; exit 2; }
  srv=(taskset -c $((n - 1))) cli=(taskset -c 0-$((n - 2)))
  echo "servers on CPU $((n - 1)), clients on CPUs 0-$((n - 2))"
else
  echo "servers and clients share all $n CPUs (PIN=0)"
fi

LOG_TO=${LOG_TO:-pipe}
case $LOG_TO in
pipe) exec 3> >(cat >/dev/null) ;;
file) exec 3>"$work/cipherd.log" ;;
*) echo "LOG_TO=pipe or LOG_TO=file" >&2; exit 2 ;;
esac
CIPHERD_ADMIN_TOKEN=$TOKEN CIPHERD_AEAD=aes-128-gcm "${srv[@]}" "$work/cipherd" serve \
  -addr 127.0.0.1:18480 -data-dir "$work/data" -log-level info >&3 2>&3 &
pids+=($!); cpid=$!
exec 3>&-
echo "cipherd's log output: $LOG_TO"
if [ "$VS" = baseline ]; then
  "${srv[@]}" "$work/baseline" -addr 127.0.0.1:18481 >"$work/baseline.log" 2>&1 &
  pids+=($!); bpid=$!
  ourl=http://127.0.0.1:18481/seal
else
  if [ -z "${PG_DSN:-}" ]; then
    bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
    [ -x "$bin/initdb" ] || { echo "VS=postgres needs PG_DSN or Debian's postgresql" >&2; exit 2; }
    as=()
    if [ "$(id -u)" = 0 ]; then chown postgres "$work"; as=(runuser -u postgres --); fi
    pgport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    "${as[@]}" "$bin/initdb" -D "$work/pg" -U cipherd --auth=trust --no-sync >/dev/null
    "${cli[@]}" "${as[@]}" "$bin/postgres" -D "$work/pg" -p "$pgport" -c listen_addresses=127.0.0.1 \
      -c unix_socket_directories="$work" >"$work/pg.log" 2>&1 &
    pids+=($!)
    PG_DSN="postgres://cipherd@127.0.0.1:$pgport/postgres?sslmode=disable"
    for i in $(seq 100); do "$bin/pg_isready" -q -h 127.0.0.1 -p "$pgport" && break; sleep 0.1; done
  fi
  head -c 32 /dev/urandom | base64 >"$work/root.key"
  exec 3> >(cat >/dev/null)
  CIPHERD_ADMIN_TOKEN=$TOKEN CIPHERD_AEAD=aes-128-gcm CIPHERD_KEYSTORE=$PG_DSN CIPHERD_ROOT_KEY_FILE="$work/root.key" \
    "${srv[@]}" "$work/cipherd" serve -addr 127.0.0.1:18481 -data-dir "$work/data-pg" -log-level info >&3 2>&3 &
  pids+=($!); bpid=$!
  exec 3>&-
  ourl=http://127.0.0.1:18481/v1/encrypt/default
fi
for i in $(seq 300); do
  curl -sf localhost:18480/readyz >/dev/null && curl -s -o /dev/null localhost:18481/ && break
  sleep 0.1
done
# cipherd measures its full speed table in the background after it is ready:
# wait for that to finish, or its CPU would be counted against the requests.
for port in 18480 $([ "$VS" = postgres ] && echo 18481); do
  for i in $(seq 600); do
    curl -s localhost:$port/speed | grep -q '"table_state":"done"' && break
    sleep 0.5
  done
done

# CPU time (user+sys, in clock ticks) of a process.
ticks() { awk '{print $14+$15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)

pt=$(head -c 64 /dev/urandom | base64 -w0)
cat >"$work/post.lua" <<LUA
wrk.method = "POST"
wrk.body = '{"plaintext":"$pt"}'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer $TOKEN"
LUA

# A warm-up request burst on each server first, not counted: a fresh
# process's first seconds of load pay for heap growth and cold caches
# (the first round ran up to 1.4× the CPU per request of the later ones).
for url in http://127.0.0.1:18480/v1/encrypt/default "$ourl"; do
  "${cli[@]}" wrk -t1 -c"$CONNS" -d"${WARMUP:-3s}" -s "$work/post.lua" "$url" >/dev/null
done
declare -A rps cpu
rat="" # per round: the other server's CPU per request over cipherd's
echo "== 64-byte JSON encrypt, wrk -t1 -c$CONNS -d$DUR, $ROUNDS interleaved rounds"
for r in $(seq "$ROUNDS"); do
  for target in cipherd $other; do
    if [ $target = cipherd ]; then url=http://127.0.0.1:18480/v1/encrypt/default; pid=$cpid
    else url=$ourl; pid=$bpid; fi
    t0=$(ticks $pid)
    out=$("${cli[@]}" wrk -t1 -c"$CONNS" -d"$DUR" --latency -s "$work/post.lua" "$url")
    t1=$(ticks $pid)
    reqs=$(echo "$out" | awk '/requests in/ {print $1}')
    r_s=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
    non2xx=$(echo "$out" | awk '/Non-2xx/ {print $NF}')
    p50=$(echo "$out" | awk '$1=="50%" {print $2}')
    p99=$(echo "$out" | awk '$1=="99%" {print $2}')
    us=$(awk -v d=$((t1 - t0)) -v n="$reqs" -v hz="$hz" 'BEGIN {printf "%.1f", d / hz * 1e6 / n}')
    printf '%-10s round %d: %10s req/s  p50 %-8s p99 %-8s server CPU %6s µs/req  non-2xx %s\n' \
      $target "$r" "$r_s" "$p50" "$p99" "$us" "${non2xx:-0}"
    rps[$target]+="$r_s "
    cpu[$target]+="$us "
    if [ $target = cipherd ]; then cus=$us; else rat+="$(awk -v a="$us" -v b="$cus" 'BEGIN {printf "%.3f", a/b}') "; fi
  done
done
sorted() { tr ' ' '\n' | grep -v '^$' | sort -g; }
median() { sorted | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
range() { sorted | awk 'NR==1 {lo=$1} {hi=$1} END {print lo "–" hi}'; }
mc=$(echo "${rps[cipherd]}" | median); mb=$(echo "${rps[$other]}" | median)
echo "median req/s: cipherd $mc, $other $mb, ratio $(awk -v a="$mc" -v b="$mb" 'BEGIN {printf "%.2f", a/b}')"
cc=$(echo "${cpu[cipherd]}" | median); cb=$(echo "${cpu[$other]}" | median)
echo "median server CPU per request: cipherd $cc µs ($(echo "${cpu[cipherd]}" | range)), $other $cb µs ($(echo "${cpu[$other]}" | range)), ratio $other/cipherd $(awk -v a="$cb" -v b="$cc" 'BEGIN {printf "%.3f", a/b}')"
echo "server CPU per request, $other/cipherd, per round: median $(echo "$rat" | median) ($(echo "$rat" | range))"
[ "$VS" = baseline ] || exit 0
where=", server and client on separate CPUs"
[ "$PIN" = 1 ] || where=", server and client sharing the CPUs (PIN=0)"
note="wrk -t1 -c$CONNS -d$DUR on loopback$where, median of $ROUNDS interleaved rounds; scripts/loadbench.sh"
chart() { # name title unit rows...
  [ -n "${CHART_DIR:-}" ] || return 0
  local name=$1 title=$2 unit=$3; shift 3
  [ "$PIN" = 1 ] || name+=-shared
  mkdir -p "$CHART_DIR"
  { echo "# title: $title"; echo "# unit: $unit"; echo "# note: $note"; printf '%s\n' "$@"; } >"$CHART_DIR/$name.tsv"
  go run ./internal/benchchart <"$CHART_DIR/$name.tsv" >"$CHART_DIR/$name.svg"
  echo "wrote $CHART_DIR/$name.svg"
}
chart service-json "64-byte JSON encrypt: cipherd against a bare fiber handler" "requests per second (higher is better); server CPU µs per request (lower is better)" \
  "$(printf 'req/s\tcipherd (full path)\t%s' "$mc")" "$(printf 'req/s\tbare fiber + AES-GCM\t%s' "$mb")"
chart service-cpu "Server CPU per 64-byte JSON encrypt" "µs per request (lower is better)" \
  "$(printf 'CPU/request\tcipherd (full path)\t%s' "$(echo "${cpu[cipherd]}" | median)")" \
  "$(printf 'CPU/request\tbare fiber + AES-GCM\t%s' "$(echo "${cpu[baseline]}" | median)")"

[ "$STREAM_MB" -gt 0 ] || exit 0

# The ceiling of a Go server for streams: net/http copying the request body
# back (internal/baseline -echo), on the servers' CPU like the others.
"${srv[@]}" "$work/baseline" -echo -addr 127.0.0.1:18482 >"$work/echo.log" 2>&1 &
pids+=($!); epid=$!
for i in $(seq 100); do curl -s -o /dev/null -X POST --data x localhost:18482/ && break; sleep 0.1; done
truncate -s "${STREAM_MB}M" "$work/big"
"${cli[@]}" curl -sS -X POST -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/octet-stream' \
  -T "$work/big" -o "$work/big.sealed" http://127.0.0.1:18480/v1/encrypt/default
# stream TARGET FILE URL: one curl -T round; prints MiB/s and the server's
# CPU seconds per GiB.
stream() {
  local pid=$1 file=$2 url=$3 t0 t1 s
  t0=$(ticks "$pid")
  s=$("${cli[@]}" curl -sS -X POST -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/octet-stream' \
    -T "$file" -o /dev/null -w '%{time_total}' "$url")
  t1=$(ticks "$pid")
  awk -v m="$STREAM_MB" -v s="$s" -v d=$((t1 - t0)) -v hz="$hz" 'BEGIN {printf "%.0f %.3f\n", m / s, d / hz / (m / 1024)}'
}
echo "== streams of $STREAM_MB MiB with curl -T (-o /dev/null), $ROUNDS interleaved rounds: MiB/s, server CPU s/GiB"
for r in $(seq "$ROUNDS"); do
  for target in echo encrypt decrypt rewrap baseline; do
    case $target in
    echo) set -- "$epid" "$work/big" http://127.0.0.1:18482/ ;;
    encrypt) set -- "$cpid" "$work/big" http://127.0.0.1:18480/v1/encrypt/default ;;
    decrypt) set -- "$cpid" "$work/big.sealed" http://127.0.0.1:18480/v1/decrypt/default ;;
    rewrap) set -- "$cpid" "$work/big.sealed" http://127.0.0.1:18480/v1/rewrap/default ;;
    baseline) set -- "$bpid" "$work/big" http://127.0.0.1:18481/stream ;;
    esac
    read -r mibs cpus < <(stream "$@")
    printf '%-9s round %d: %6s MiB/s  server CPU %s s/GiB\n' $target "$r" "$mibs" "$cpus"
    rps[s$target]+="$mibs "
    cpu[s$target]+="$cpus "
  done
done
se=$(echo "${rps[secho]}" | median)
for target in encrypt decrypt rewrap baseline; do
  m=$(echo "${rps[s$target]}" | median)
  printf 'median %-8s %6s MiB/s (%s), %.2f× the echo; server CPU %s s/GiB (echo %s)\n' $target "$m" \
    "$(echo "${rps[s$target]}" | range)" "$(awk -v a="$m" -v b="$se" 'BEGIN {print a/b}')" \
    "$(echo "${cpu[s$target]}" | median)" "$(echo "${cpu[secho]}" | median)"
done
sc=$(echo "${rps[sencrypt]}" | median); sb=$(echo "${rps[sbaseline]}" | median)
note="curl -T of $STREAM_MB MiB on loopback$where, median of $ROUNDS interleaved rounds; scripts/loadbench.sh"
chart service-stream "Streams over HTTP: cipherd, a net/http echo, a bare fiber handler" "MiB/s (higher is better)" \
  "$(printf '%s MiB\tnet/http echo (ceiling)\t%s' "$STREAM_MB" "$se")" \
  "$(printf '%s MiB\tcipherd encrypt\t%s' "$STREAM_MB" "$sc")" \
  "$(printf '%s MiB\tcipherd decrypt\t%s' "$STREAM_MB" "$(echo "${rps[sdecrypt]}" | median)")" \
  "$(printf '%s MiB\tbare fiber + AES-GCM\t%s' "$STREAM_MB" "$sb")"

echo "== 4 concurrent $STREAM_MB MiB streams: aggregate MiB/s, the echo's, and cipherd's peak RSS"
for target in echo encrypt; do
  if [ $target = echo ]; then url=http://127.0.0.1:18482/; else url=http://127.0.0.1:18480/v1/encrypt/default; fi
  start=$(date +%s.%N)
  streams=()
  for i in 1 2 3 4; do
    "${cli[@]}" curl -sS -X POST -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/octet-stream' \
      -T "$work/big" -o /dev/null "$url" &
    streams+=($!)
  done
  wait "${streams[@]}"
  printf '%-8s 4 streams: %.0f MiB/s in all\n' $target "$(awk -v m="$STREAM_MB" -v a="$start" -v b="$(date +%s.%N)" 'BEGIN {print 4 * m / (b - a)}')"
done
echo "cipherd peak RSS (VmHWM): $(awk '/VmHWM/ {print $2, $3}' /proc/$cpid/status)"

declare -A mem ratio
# The clients against curl: the same upload to the same server, cipherd's
# CLI (the Go client, reading the file, progress drawn on standard error)
# and curl -T, answers to /dev/null, on the clients' CPUs, in turn.
echo "== clients: cipherd encrypt/decrypt -progress always against curl -T, $STREAM_MB MiB, $ROUNDS interleaved rounds: MiB/s, client peak RSS"
# client NAME OP FILE: one round; prints MiB/s and the client's peak RSS in kB.
client() {
  local name=$1 op=$2 file=$3
  if [ "$name" = curl ]; then
    /usr/bin/time -o "$work/time" -f '%e %M' "${cli[@]}" curl -sS --fail -X POST -H "Authorization: Bearer $TOKEN" \
      -H 'Content-Type: application/octet-stream' -T "$file" -o /dev/null "http://127.0.0.1:18480/v1/$op/default"
  else
    CIPHERD_URL=http://127.0.0.1:18480 CIPHERD_TOKEN=$TOKEN /usr/bin/time -o "$work/time" -f '%e %M' "${cli[@]}" \
      "$work/cipherd" "$op" --key default -progress always -i "$file" -o /dev/null 2>/dev/null
  fi
  awk -v m="$STREAM_MB" '{printf "%.0f %s\n", m / $1, $2}' "$work/time"
}
for r in $(seq "$ROUNDS"); do
  for op in encrypt decrypt; do
    file=$work/big
    [ $op = decrypt ] && file=$work/big.sealed
    for name in curl cipherd; do
      read -r mibs rss < <(client $name $op "$file")
      printf '%-7s %-7s round %d: %6s MiB/s  peak RSS %s kB\n' $name $op "$r" "$mibs" "$rss"
      rps[c$name$op]+="$mibs "
      mem[c$name$op]+="$rss "
      ratio[c$op]+="$(awk -v a="$mibs" -v b="${last:-0}" 'BEGIN {if (b > 0) print a / b}') "
      last=$mibs
    done
    last=
  done
done
for op in encrypt decrypt; do
  printf 'median %-7s cipherd %s MiB/s (%s), curl %s MiB/s (%s); cipherd ÷ curl by round: %s; peak RSS cipherd %s kB, curl %s kB\n' $op \
    "$(echo "${rps[ccipherd$op]}" | median)" "$(echo "${rps[ccipherd$op]}" | range)" \
    "$(echo "${rps[ccurl$op]}" | median)" "$(echo "${rps[ccurl$op]}" | range)" "${ratio[c$op]}" \
    "$(echo "${mem[ccipherd$op]}" | median)" "$(echo "${mem[ccurl$op]}" | median)"
done
exit 0
