#!/usr/bin/env bash
# What the audit trail costs: the 64-byte JSON encrypt (or, with BODY=batch,
# batches of 100 such items) against three servers side by side, in
# interleaved rounds, each server on the last CPU with GOMAXPROCS=1 and wrk
# on the others, as scripts/loadbench.sh pins them:
#
#   base: BASE (default 755276a, the tree before the audit trail), no
#         records;
#   off:  the working tree built with the audit trail compiled out (a
#         `go build -overlay` of server/audit.go in which no record is
#         built or written; cipherd itself has no such switch): the tree's
#         cost without the audit trail, which base also differs from by
#         everything else since BASE;
#   null: the working tree with audit_log /dev/null: each record built and
#         written, nothing synced (what the records cost, and what else
#         changed since BASE);
#   tree: the working tree, each record written and synced to audit.log in
#         its data directory before the answer.
#
# It prints each round's requests per second, server CPU per request
# (user + system time over the requests wrk completed) and the busy time of
# the servers' CPU per request (which adds the kernel's work there on the
# server's behalf), each round's ratios tree/off (what the audit trail
# costs), tree/null and tree/base, their medians, and the tree's records
# per sync (cipherd_audit_records_total over cipherd_audit_syncs_total).
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
cp "$work/cipherd-tree" "$work/cipherd-null"
# off: appendAuditRecord returns its buffer as it came, commitAudit nil.
awk '{print} /^func \(s \*Server\) appendAuditRecord\(/ {print "\treturn b"} /^func \(s \*Server\) commitAudit\(/ {print "\treturn nil"}' \
  server/audit.go >"$work/audit_off.go"
[ "$(grep -c '^	return b$\|^	return nil$' "$work/audit_off.go")" -ge 2 ] || { echo "auditbench: could not compile the audit trail out" >&2; exit 1; }
printf '{"Replace": {"%s": "%s"}}\n' "$PWD/server/audit.go" "$work/audit_off.go" >"$work/overlay.json"
go build -overlay "$work/overlay.json" -o "$work/cipherd-off" ./cmd/cipherd
n=$(nproc)
srv=(taskset -c $((n - 1))) cli=(taskset -c 0-$((n - 2)))
vs=(base off null tree)
declare -A port=([base]=18490 [off]=18493 [null]=18492 [tree]=18491)
for v in "${vs[@]}"; do
  extra=()
  [ "$v" = null ] && extra=(CIPHERD_AUDIT_LOG=/dev/null)
  env "${extra[@]}" CIPHERD_ADMIN_TOKEN=tok CIPHERD_AEAD=aes-128-gcm CIPHERD_SKIP_BENCHMARK=1 GOMAXPROCS=1 "${srv[@]}" \
    "$work/cipherd-$v" serve -addr 127.0.0.1:${port[$v]} -data-dir "$work/data-$v" -log-level info >/dev/null 2>&1 &
  pids+=($!)
  declare "pid_$v=$!"
done
for v in "${vs[@]}"; do
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
for v in "${vs[@]}"; do # warm-up, not counted
  "${cli[@]}" wrk -t1 -c$CONNS -d2s -s "$work/post.lua" http://127.0.0.1:${port[$v]}/v1/encrypt/default >/dev/null
done
echo "== $BODY encrypt, wrk -t1 -c$CONNS -d$DUR, $ROUNDS interleaved rounds: base $BASE, off and null and tree $(git rev-parse --short HEAD)$(git diff --quiet || echo +changes)"
for r in $(seq "$ROUNDS"); do
  for v in "${vs[@]}"; do
    p=pid_$v
    a=$(ticks "${!p}") ca=$(cpubusy)
    out=$("${cli[@]}" wrk -t1 -c$CONNS -d"$DUR" -s "$work/post.lua" http://127.0.0.1:${port[$v]}/v1/encrypt/default)
    b=$(ticks "${!p}") cb=$(cpubusy)
    reqs=$(echo "$out" | awk '/requests in/ {print $1}')
    rps=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
    non=$(echo "$out" | awk '/Non-2xx/ {print $NF}')
    cpu=$(awk -v t=$((b - a)) -v n="$reqs" -v hz="$hz" 'BEGIN {printf "%.1f", t * 1e6 / hz / n}')
    busy=$(awk -v t=$((cb - ca)) -v n="$reqs" -v hz="$hz" 'BEGIN {printf "%.1f", t * 1e6 / hz / n}')
    printf '%-4s round %d: %9s req/s  server CPU %6s µs/req  its CPU busy %6s µs/req  non-2xx %s\n' $v "$r" "$rps" \
      "$cpu" "$busy" "${non:-0}"
    echo "$r $v $cpu $busy" >>"$work/rounds"
  done
done
# Each round's ratios, then their medians.
awk '{cpu[$1, $2] = $3; busy[$1, $2] = $4; if ($1 > n) n = $1}
  function med(a, k,   i, j, t) {
    for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (a[j] < a[i]) {t = a[i]; a[i] = a[j]; a[j] = t}
    return k % 2 ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2
  }
  END {
    split("base off null tree", vs)
    for (w = 1; w <= 4; w++) {
      for (r = 1; r <= n; r++) {c[r] = cpu[r, vs[w]]; u[r] = busy[r, vs[w]]}
      lo = c[1]; hi = c[1]; for (r = 2; r <= n; r++) {if (c[r] < lo) lo = c[r]; if (c[r] > hi) hi = c[r]}
      printf "%s: server CPU median %.1f µs/req (%.1f–%.1f)", vs[w], med(c, n), lo, hi
      lo = u[1]; hi = u[1]; for (r = 2; r <= n; r++) {if (u[r] < lo) lo = u[r]; if (u[r] > hi) hi = u[r]}
      printf ", CPU busy %.1f (%.1f–%.1f)\n", med(u, n), lo, hi
    }
    split("off null base", against)
    for (w = 1; w <= 3; w++) {
      o = against[w]; line = ""
      for (r = 1; r <= n; r++) {
        c[r] = cpu[r, "tree"] / cpu[r, o]; u[r] = busy[r, "tree"] / busy[r, o]
        line = line sprintf(" %.2f/%.2f", c[r], u[r])
      }
      printf "tree/%s by round (server CPU/CPU busy):%s; median %.2f/%.2f\n", o, line, med(c, n), med(u, n)
    }
  }' "$work/rounds"
m=$(curl -s localhost:${port[tree]}/metrics)
rec=$(echo "$m" | awk '$1 == "cipherd_audit_records_total" {print $2}')
syn=$(echo "$m" | awk '$1 == "cipherd_audit_syncs_total" {print $2}')
echo "tree: $rec records in $syn syncs, $(awk -v r="$rec" -v s="$syn" 'BEGIN {printf "%.1f", r / s}') records per sync"
