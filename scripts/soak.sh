#!/usr/bin/env bash
# Soak test on loopback: wrk keeps JSON encrypt and decrypt of a small message
# going for DURATION seconds, against one cipherd replica or against replicas
# behind HAProxy (scripts/cluster.sh), while the RSS, live heap, goroutines
# and open files of every cipherd process are sampled into a CSV.
#
#   scripts/soak.sh                          # 600 s, one replica, direct
#   REPLICAS=3 scripts/soak.sh               # three replicas behind HAProxy
#   DURATION=20 SAMPLE=1 scripts/soak.sh     # the short version CI runs
#
# Settings (environment): DURATION (s, 600), REPLICAS (1), HAPROXY (0 with
# one replica, 1 with more), CONNS (16), THREADS (2), SAMPLE (s between
# samples, 5), WARMUP (s of load before measuring, 10; 2 when DURATION < 60),
# RSS_GROWTH_PCT (20), HEAP_GROWTH_PCT (20), GOROUTINE_GROWTH (20),
# CONN_HEAP_KB (512), OUT (directory for the CSV and the logs; a new one
# under /tmp), PORT_BASE (18600).
#
# Exits 1 when a response is not 2xx or does not hold what it should (a
# decryption must give back the plaintext), on any socket error or timeout,
# when a replica logs an error or exits, or when, from the first third of the
# samples to the last, a replica's median RSS grows by more than
# RSS_GROWTH_PCT percent, its live heap (go_gc_heap_live_bytes) by more than
# HEAP_GROWTH_PCT percent (the last third's smallest against the first
# third's largest), or its largest goroutine count by more than
# GOROUTINE_GROWTH. The live heap changes only at a collection, every few
# seconds under this load, and from one collection to the next it moves
# between about 7.6 and 10.2 MiB with no trend (120 s, three replicas): a
# third of a short run holds one or two collections, so the check compares
# the whole of each third, which a leak raises and that back and forth
# does not. A connection holds its read and write buffers
# (io_buffer_size, 256 KiB each by default) for as long as it is open, and
# HAProxy opens and closes backend connections as the load shifts (idle ones
# close after pool-purge-delay), so the RSS and heap limits add CONN_HEAP_KB
# for each file descriptor the replica holds beyond those of the first third.
# Needs go, curl, wrk (and haproxy with HAPROXY=1).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/cluster.sh"

DURATION=${DURATION:-600}
REPLICAS=${REPLICAS:-1}
HAPROXY=${HAPROXY:-$([ "$REPLICAS" -gt 1 ] && echo 1 || echo 0)}
CONNS=${CONNS:-16}
THREADS=${THREADS:-2}
SAMPLE=${SAMPLE:-5}
WARMUP=${WARMUP:-$([ "$DURATION" -lt 60 ] && echo 2 || echo 10)}
RSS_GROWTH_PCT=${RSS_GROWTH_PCT:-20}
HEAP_GROWTH_PCT=${HEAP_GROWTH_PCT:-20}
GOROUTINE_GROWTH=${GOROUTINE_GROWTH:-20}
CONN_HEAP_KB=${CONN_HEAP_KB:-512}
OUT=${OUT:-$(mktemp -d /tmp/cipherd-soak.XXXXXX)}
mkdir -p "$OUT"
CSV=$OUT/samples.csv
sampler=

finish() {
  [ -n "$sampler" ] && kill "$sampler" 2>/dev/null && wait "$sampler" 2>/dev/null
  cp "$CL_WORK"/*.log "$OUT/" 2>/dev/null || true
  cl_stop
}
trap finish EXIT

cl_init
cl_start_replicas "$REPLICAS"
if [ "$HAPROXY" = 1 ]; then
  cl_start_haproxy "$REPLICAS"
  url=http://$CL_LB_ADDR
  target="$REPLICAS replicas behind HAProxy"
else
  url=http://${CL_ADDRS[0]}
  target="$REPLICAS replica(s), wrk to the first directly"
fi

# One ciphertext of the message, for the decryptions.
pt=$(head -c 100 /dev/urandom | base64 -w0)
aad=$(printf soak | base64 -w0)
ct=$(curl -sf -H "Authorization: Bearer $CL_TOKEN" -H 'Content-Type: application/json' \
  -d "{\"plaintext\":\"$pt\",\"context\":\"$aad\"}" "$url/v1/encrypt/$CL_KEY" |
  sed -n 's/.*"ciphertext":"\([^"]*\)".*/\1/p')
[ -n "$ct" ] || { echo "soak: the first encryption failed" >&2; exit 1; }

# Odd requests encrypt, even ones decrypt; every body is checked.
cat >"$CL_WORK/soak.lua" <<LUA
local headers = {["Content-Type"] = "application/json", ["Authorization"] = "Bearer $CL_TOKEN"}
local enc = '{"plaintext":"$pt","context":"$aad"}'
local dec = '{"ciphertext":"$ct","context":"$aad"}'
local want = '"plaintext":"$pt"'
local threads = {}
function setup(thread) table.insert(threads, thread) end
function init(args) n, bad, encs, decs = 0, 0, 0, 0 end
function request()
  n = n + 1
  if n % 2 == 0 then return wrk.format("POST", "/v1/decrypt/$CL_KEY", headers, dec) end
  return wrk.format("POST", "/v1/encrypt/$CL_KEY", headers, enc)
end
function response(status, hdrs, body)
  if status ~= 200 then bad = bad + 1
  elseif body:find(want, 1, true) then decs = decs + 1
  elseif body:find('"ciphertext":"', 1, true) then encs = encs + 1
  else bad = bad + 1 end
end
function done(summary, latency, requests)
  local b, e, d = 0, 0, 0
  for _, t in ipairs(threads) do b = b + t:get("bad"); e = e + t:get("encs"); d = d + t:get("decs") end
  io.write(string.format("checked: encrypt_ok %d decrypt_ok %d bad %d\n", e, d, b))
end
LUA

echo "soak: $target, wrk -t$THREADS -c$CONNS, ${WARMUP}s warm-up then ${DURATION}s; samples every ${SAMPLE}s in $CSV"

# sample: one row per process: seconds since start, process, RSS (KiB),
# goroutines and live heap after the last GC (KiB) (cipherd only), open file
# descriptors.
sample() {
  local t0=$1 i pid now gh
  while :; do
    now=$(($(date +%s) - t0))
    for i in "${!CL_PIDS[@]}"; do
      pid=${CL_PIDS[$i]}
      gh=$(curl -s --max-time 2 "http://${CL_ADDRS[$i]}/metrics" |
        awk '$1 == "go_goroutines" {g = $2} $1 == "go_gc_heap_live_bytes" {h = int($2 / 1024)} END {print g "," h}')
      printf '%s,cipherd%d,%s,%s,%s\n' "$now" $((i + 1)) "$(awk '/^VmRSS/ {print $2}' "/proc/$pid/status" 2>/dev/null || echo)" \
        "$(ls "/proc/$pid/fd" 2>/dev/null | wc -l)" "$gh"
    done
    if [ -n "$CL_LB_PID" ]; then
      printf '%s,haproxy,%s,%s,,\n' "$now" "$(awk '/^VmRSS/ {print $2}' "/proc/$CL_LB_PID/status")" "$(ls "/proc/$CL_LB_PID/fd" | wc -l)"
    fi
    sleep "$SAMPLE"
  done
}
# One wrk run covers the warm-up and the measurement, and the sampling starts
# after the warm-up: a second run would open new connections, which HAProxy
# spreads over the replicas anew during the measurement, and a replica's
# live heap grows with the connections it serves.
echo "seconds,process,rss_kb,fds,goroutines,heap_live_kb" >"$CSV"
(sleep "$WARMUP"; sample "$(date +%s)") >>"$CSV" &
sampler=$!
out=$(wrk -t"$THREADS" -c"$CONNS" -d"$((WARMUP + DURATION))s" --timeout 5s --latency -s "$CL_WORK/soak.lua" "$url")
kill "$sampler"; wait "$sampler" 2>/dev/null || true; sampler=
echo "$out" >"$OUT/wrk.txt"

fail=()
reqs=$(echo "$out" | awk '/requests in/ {print $1}')
rps=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
non2xx=$(echo "$out" | awk '/Non-2xx/ {print $NF}')
sockerr=$(echo "$out" | awk '/Socket errors/ {sub(/.*Socket errors: /, ""); print}')
checked=$(echo "$out" | awk '/^checked:/ {sub(/^checked: /, ""); print}')
bad=$(echo "$checked" | awk '{print $NF}')
echo "requests: $reqs in $(echo "$out" | awk '/requests in/ {sub(/,$/, "", $4); print $4}'), $rps req/s; $checked"
echo "latency: p50 $(echo "$out" | awk '$1 == "50%" {print $2}')  p90 $(echo "$out" | awk '$1 == "90%" {print $2}')  p99 $(echo "$out" | awk '$1 == "99%" {print $2}')  max $(echo "$out" | awk '$1 == "Latency" {print $4}')"
echo "errors: non-2xx ${non2xx:-0}, socket errors: ${sockerr:-none}, bad bodies ${bad:-?}"
[ -z "$non2xx" ] || fail+=("$non2xx non-2xx responses")
[ -z "$sockerr" ] || fail+=("socket errors: $sockerr")
[ "${bad:-x}" = 0 ] || fail+=("${bad:-unknown number of} responses without the expected body")

for i in "${!CL_PIDS[@]}"; do
  name=cipherd$((i + 1))
  kill -0 "${CL_PIDS[$i]}" 2>/dev/null || fail+=("$name exited")
  if grep -q '"level":"error"' "$CL_WORK/$name.log"; then fail+=("$name logged errors"); fi
  # Thirds of this process's samples: medians of RSS, the first third's
  # largest and the last third's smallest live heap, largest goroutine
  # count.
  read -r n rss0 rss1 h0 h1 g0 g1 f0 f1 first_rss last_rss first_g last_g < <(awk -F, -v p="$name" '
    $2 == p && $3 != "" && $5 != "" && $6 != "" { n++; rss[n] = $3; f[n] = $4; g[n] = $5; h[n] = $6 }
    function median(a, lo, hi,   m, i, j, t, s) {
      m = 0; for (i = lo; i <= hi; i++) s[++m] = a[i]
      for (i = 2; i <= m; i++) { t = s[i]; for (j = i - 1; j >= 1 && s[j] > t; j--) s[j + 1] = s[j]; s[j + 1] = t }
      return m % 2 ? s[(m + 1) / 2] : int((s[m / 2] + s[m / 2 + 1]) / 2)
    }
    function maxof(a, lo, hi,   i, x) { x = a[lo]; for (i = lo; i <= hi; i++) if (a[i] > x) x = a[i]; return x }
    function minof(a, lo, hi,   i, x) { x = a[lo]; for (i = lo; i <= hi; i++) if (a[i] < x) x = a[i]; return x }
    END {
      if (n < 3) { print n, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0; exit }
      k = int(n / 3)
      print n, median(rss, 1, k), median(rss, n - k + 1, n), maxof(h, 1, k), minof(h, n - k + 1, n),
        maxof(g, 1, k), maxof(g, n - k + 1, n), maxof(f, 1, k), maxof(f, n - k + 1, n), rss[1], rss[n], g[1], g[n]
    }' "$CSV")
  printf '%s: %d samples; RSS first %d KiB, last %d KiB (median of first third %s, last third %s); live heap at most %s KiB in the first third, at least %s KiB in the last; goroutines first %s, last %s (max of first third %s, last third %s); fds max %s then %s\n' \
    "$name" "$n" "$first_rss" "$last_rss" "$rss0" "$rss1" "$h0" "$h1" "$first_g" "$last_g" "$g0" "$g1" "$f0" "$f1"
  if [ "$n" -lt 3 ]; then fail+=("$name: only $n samples"); continue; fi
  # grow WHAT FROM TO PCT fails when TO is more than PCT percent above FROM,
  # plus the buffers of the connections opened since.
  conns=$((f1 > f0 ? f1 - f0 : 0))
  grow() {
    if awk -v a="$2" -v b="$3" -v p="$4" -v c="$((conns * CONN_HEAP_KB))" 'BEGIN {exit !(b > a * (1 + p / 100) + c)}'; then
      fail+=("$name $1 grew from $2 to $3 KiB (more than $4% plus $conns connection(s) of $CONN_HEAP_KB KiB)")
    fi
  }
  grow RSS "$rss0" "$rss1" "$RSS_GROWTH_PCT"
  grow "live heap" "$h0" "$h1" "$HEAP_GROWTH_PCT"
  [ "$g1" -le $((g0 + GOROUTINE_GROWTH)) ] || fail+=("$name goroutines grew from $g0 to $g1")
done
if [ "$HAPROXY" = 1 ]; then
  echo "haproxy: $(awk -F, '$2 == "haproxy" {n++; if (n == 1) {a = $3; c = $4}; b = $3; d = $4} END {printf "RSS first %d KiB, last %d KiB; fds %d then %d", a, b, c, d}' "$CSV")"
  echo "haproxy servers: $(cl_status | tr '\n' ' ')"
  [ "$(cl_status | grep -c ' UP$')" = "$REPLICAS" ] || fail+=("HAProxy does not see every replica UP")
  curl -sf "http://$CL_STATS_ADDR/;csv" | awk -F, '
    NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
    $1 == "cipherd" && $2 == "BACKEND" { printf "haproxy backend: retries %s, redispatches %s, connection errors %s, response errors %s, 5xx %s\n",
      $col["wretr"], $col["wredis"], $col["econ"], $col["eresp"], $col["hrsp_5xx"] }'
fi

if [ ${#fail[@]} -gt 0 ]; then
  printf 'soak FAILED: %s\n' "${fail[@]}"
  echo "details in $OUT"
  exit 1
fi
echo "soak passed; CSV and logs in $OUT"
