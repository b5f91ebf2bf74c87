#!/usr/bin/env bash
# Loopback benchmark of the batch route beside the single-item route: the
# server CPU time per 64-byte item, for single-item JSON encrypts and for
# batches of ITEMS 64-byte items, with wrk, rounds interleaved.
#
#   scripts/batchbench.sh                    # 10s rounds, 3 of each, 32 connections
#   DUR=5s ROUNDS=5 CONNS=16 ITEMS=100 scripts/batchbench.sh
#   OTHER=/path/to/cipherd scripts/batchbench.sh  # also another build, same rounds
#
# Needs wrk and curl. The server logs at info level into a pipe another
# process drains, as in scripts/loadbench.sh (one access line per request, one
# audit line per batch). With two CPUs or more the server runs on the last
# CPU with GOMAXPROCS=1 and wrk on the others (PIN=0: all share all CPUs).
# CPU time is the server process's user+system time (/proc/PID/stat) over a
# round, divided by the items answered.
set -euo pipefail
cd "$(dirname "$0")/.."
DUR=${DUR:-10s}
ROUNDS=${ROUNDS:-3}
CONNS=${CONNS:-32}
ITEMS=${ITEMS:-100}
TOKEN=batchbench-token
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

go build -o "$work/cipherd" ./cmd/cipherd
srv=() cli=()
n=$(nproc)
PIN=${PIN:-$([ "$n" -ge 2 ] && echo 1 || echo 0)}
if [ "$PIN" = 1 ]; then
  srv=(env GOMAXPROCS=1 taskset -c $((n - 1))) cli=(taskset -c 0-$((n - 2)))
  echo "server on CPU $((n - 1)), wrk on CPUs 0-$((n - 2))"
else
  echo "server and wrk share all $n CPUs (PIN=0)"
fi
exec 3> >(cat >/dev/null)
declare -A port pid
servers=(this)
[ -n "${OTHER:-}" ] && servers+=(other)
for sv in "${servers[@]}"; do
  bin=$work/cipherd p=18490
  [ $sv = other ] && bin=$OTHER p=18491
  CIPHERD_ADMIN_TOKEN=$TOKEN CIPHERD_AEAD=aes-128-gcm "${srv[@]}" "$bin" serve \
    -addr 127.0.0.1:$p -data-dir "$work/data-$sv" -log-level info >&3 2>&3 &
  pids+=($!); pid[$sv]=$!; port[$sv]=$p
done
exec 3>&-
for sv in "${servers[@]}"; do
  for i in $(seq 100); do curl -sf localhost:${port[$sv]}/readyz >/dev/null && break; sleep 0.1; done
  # The full speed table is measured in the background once ready: wait
  # for it, or its CPU would count against the requests.
  for i in $(seq 600); do
    curl -s localhost:${port[$sv]}/speed | grep -q '"table_state":"done"' && break
    sleep 0.5
  done
done

ticks() { awk '{print $14+$15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)
pt=$(head -c 64 /dev/urandom | base64 -w0)
batch=$(awk -v n="$ITEMS" -v pt="$pt" 'BEGIN { printf "{\"items\":["; for (i = 0; i < n; i++) printf "%s{\"plaintext\":\"%s\"}", (i ? "," : ""), pt; printf "]}" }')
for kind in single batch; do
  body='{"plaintext":"'$pt'"}'
  [ $kind = batch ] && body=$batch
  cat >"$work/$kind.lua" <<LUA
wrk.method = "POST"
wrk.body = '$body'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer $TOKEN"
LUA
done
# One batch, checked: 200 and ITEMS ciphertexts.
for sv in "${servers[@]}"; do
  got=$(curl -s -w '\n%{http_code}' -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' -d "$batch" localhost:${port[$sv]}/v1/encrypt/default)
  [ "$(echo "$got" | tail -1)" = 200 ] && [ "$(echo "$got" | head -1 | grep -o '"ciphertext"' | wc -l)" = "$ITEMS" ] ||
    { echo "$sv: batch check failed: $(echo "$got" | tail -c 300)" >&2; exit 1; }
done

declare -A cpu
echo "== 64-byte JSON encrypts: single items and batches of $ITEMS, wrk -t1 -c$CONNS -d$DUR, $ROUNDS interleaved rounds"
for r in $(seq "$ROUNDS"); do
  for sv in "${servers[@]}"; do for kind in single batch; do
    per=1; [ $kind = batch ] && per=$ITEMS
    t0=$(ticks ${pid[$sv]})
    out=$("${cli[@]}" wrk -t1 -c"$CONNS" -d"$DUR" -s "$work/$kind.lua" http://127.0.0.1:${port[$sv]}/v1/encrypt/default)
    t1=$(ticks ${pid[$sv]})
    reqs=$(echo "$out" | awk '/requests in/ {print $1}')
    non2xx=$(echo "$out" | awk '/Non-2xx/ {print $NF}')
    us=$(awk -v d=$((t1 - t0)) -v n="$reqs" -v per="$per" -v hz="$hz" 'BEGIN {printf "%.2f", d / hz * 1e6 / (n * per)}')
    printf '%-5s %-6s round %d: %8s requests, %9s items/s, server CPU %6s µs/item  non-2xx %s\n' \
      $sv $kind "$r" "$reqs" "$(awk -v n="$reqs" -v per="$per" -v d="${DUR%s}" 'BEGIN {printf "%.0f", n * per / d}')" "$us" "${non2xx:-0}"
    cpu[$sv-$kind]+="$us "
  done; done
done
sorted() { tr ' ' '\n' | grep -v '^$' | sort -g; }
median() { sorted | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
range() { sorted | awk 'NR==1 {lo=$1} {hi=$1} END {print lo "–" hi}'; }
for sv in "${servers[@]}"; do
  ms=$(echo "${cpu[$sv-single]}" | median); mb=$(echo "${cpu[$sv-batch]}" | median)
  echo "$sv: median server CPU per item: single $ms µs ($(echo "${cpu[$sv-single]}" | range)), batch of $ITEMS $mb µs ($(echo "${cpu[$sv-batch]}" | range)), ratio $(awk -v a="$mb" -v b="$ms" 'BEGIN {printf "%.2f", a/b}')"
done
