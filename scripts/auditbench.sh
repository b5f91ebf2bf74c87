#!/usr/bin/env bash
# What the audit trail costs: the 64-byte JSON encrypt (or, with BODY=batch,
# batches of 100 such items) against two builds side by side, in
# interleaved rounds, each server on the last CPU with GOMAXPROCS=1 and wrk
# on the others, as scripts/loadbench.sh pins them:
#
#   BASE (default 755276a, the tree before the audit trail): no records;
#   the working tree: a record per request, written and synced to
#   audit.log in its data directory before the answer.
#
# It prints each round's requests per second, server CPU per request
# (user + system time over the requests wrk completed) and the busy time of
# the servers' CPU per request (which adds the kernel's work there on the
# server's behalf), and the working
# tree's records per sync (cipherd_audit_records_total over
# cipherd_audit_syncs_total).
#
#   ROUNDS=5 DUR=5s scripts/auditbench.sh
#   BODY=batch scripts/auditbench.sh
#   CONNS=256 scripts/auditbench.sh   # enough connections to keep the server busy
set -euo pipefail
cd "$(dirname "$0")/.."
BASE=${BASE:-755276a}
ROUNDS=${ROUNDS:-5}
DUR=${DUR:-5s}
BODY=${BODY:-json}
CONNS=${CONNS:-32}
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  git worktree remove --force "$work/base" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

git worktree add -q --detach "$work/base" "$BASE"
(cd "$work/base" && go build -o "$work/cipherd-base" ./cmd/cipherd)
go build -o "$work/cipherd-tree" ./cmd/cipherd
n=$(nproc)
srv=(taskset -c $((n - 1))) cli=(taskset -c 0-$((n - 2)))
declare -A port=([base]=18490 [tree]=18491)
for v in base tree; do
  CIPHERD_ADMIN_TOKEN=tok CIPHERD_AEAD=aes-128-gcm CIPHERD_SKIP_BENCHMARK=1 GOMAXPROCS=1 "${srv[@]}" \
    "$work/cipherd-$v" serve -addr 127.0.0.1:${port[$v]} -data-dir "$work/data-$v" -log-level info >/dev/null 2>&1 &
  pids+=($!)
  declare "pid_$v=$!"
done
for v in base tree; do
  for i in $(seq 100); do curl -sf localhost:${port[$v]}/readyz >/dev/null && break; sleep 0.1; done
done

pt=$(head -c 64 /dev/urandom | base64 -w0)
if [ "$BODY" = batch ]; then
  items=$(for i in $(seq 100); do printf '{"plaintext":"%s"},' "$pt"; done)
  body="{\"items\":[${items%,}]}"
else
  body="{\"plaintext\":\"$pt\"}"
fi
cat >"$work/post.lua" <<LUA
wrk.method = "POST"
wrk.body = '$body'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer tok"
LUA
ticks() { awk '{print $14+$15}' "/proc/$1/stat"; }
# Busy ticks of the servers' CPU: the server and what the kernel does there
# on its behalf (its interrupts, and the kernel worker that runs an AIO
# sync), which the process's own time does not include.
cpubusy() { awk -v c="cpu$((n - 1))" '$1 == c {print $2+$3+$4+$7+$8}' /proc/stat; }
hz=$(getconf CLK_TCK)
for v in base tree; do # warm-up, not counted
  "${cli[@]}" wrk -t1 -c$CONNS -d2s -s "$work/post.lua" http://127.0.0.1:${port[$v]}/v1/encrypt/default >/dev/null
done
echo "== $BODY encrypt, wrk -t1 -c$CONNS -d$DUR, $ROUNDS interleaved rounds: base $BASE, tree $(git rev-parse --short HEAD)$(git diff --quiet || echo +changes)"
for r in $(seq "$ROUNDS"); do
  for v in base tree; do
    p=pid_$v
    a=$(ticks "${!p}") ca=$(cpubusy)
    out=$("${cli[@]}" wrk -t1 -c$CONNS -d"$DUR" -s "$work/post.lua" http://127.0.0.1:${port[$v]}/v1/encrypt/default)
    b=$(ticks "${!p}") cb=$(cpubusy)
    reqs=$(echo "$out" | awk '/requests in/ {print $1}')
    rps=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
    non=$(echo "$out" | awk '/Non-2xx/ {print $NF}')
    printf '%-4s round %d: %9s req/s  server CPU %6s µs/req  its CPU busy %6s µs/req  non-2xx %s\n' $v "$r" "$rps" \
      "$(awk -v t=$((b - a)) -v n="$reqs" -v hz="$hz" 'BEGIN {printf "%.1f", t * 1e6 / hz / n}')" \
      "$(awk -v t=$((cb - ca)) -v n="$reqs" -v hz="$hz" 'BEGIN {printf "%.1f", t * 1e6 / hz / n}')" "${non:-0}"
  done
done
m=$(curl -s localhost:${port[tree]}/metrics)
rec=$(echo "$m" | awk '$1 == "cipherd_audit_records_total" {print $2}')
syn=$(echo "$m" | awk '$1 == "cipherd_audit_syncs_total" {print $2}')
echo "tree: $rec records in $syn syncs, $(awk -v r="$rec" -v s="$syn" 'BEGIN {printf "%.1f", r / s}') records per sync"
