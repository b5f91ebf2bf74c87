#!/usr/bin/env bash
# The workload of aws-encryption-sdk#768: FILES files of SIZE_MB MB, each
# encrypted with `cipherd encrypt --local` into a file, then each sealed
# file decrypted with `cipherd decrypt --local` into another, one process
# (and one service call) per file, in sequence; RUNS runs, each timed from
# the first encrypt to the last decrypt, with the outputs removed and
# `sync` between runs (not timed). Prints each run's time and the median.
#
#   scripts/filesbench.sh
#   FILES=10 SIZE_MB=50 RUNS=5 DIR=/var/tmp scripts/filesbench.sh
#   BIN=/path/to/cipherd scripts/filesbench.sh   # another build's CLI and service
#
# The service runs on a free port with a data directory of its own, its
# AEAD AES-256-GCM. Needs curl.
set -euo pipefail
cd "$(dirname "$0")/.."
FILES=${FILES:-10}
SIZE_MB=${SIZE_MB:-50}
RUNS=${RUNS:-5}
PORT=${PORT:-18496}
work=$(mktemp -d "${DIR:-/tmp}/filesbench.XXXXXX")
pid=
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

if [ -n "${BIN:-}" ]; then cp "$BIN" "$work/cipherd"; else go build -o "$work/cipherd" ./cmd/cipherd; fi
CIPHERD_ADMIN_TOKEN=tok CIPHERD_AEAD=aes-256-gcm CIPHERD_SKIP_BENCHMARK=1 \
  "$work/cipherd" serve -addr 127.0.0.1:$PORT -data-dir "$work/data" >"$work/serve.log" 2>&1 &
pid=$!
for i in $(seq 100); do curl -sf localhost:$PORT/readyz >/dev/null && break; sleep 0.1; done
export CIPHERD_URL=http://127.0.0.1:$PORT CIPHERD_TOKEN=tok

for i in $(seq "$FILES"); do head -c $((SIZE_MB * 1000 * 1000)) /dev/urandom >"$work/in$i"; done
sync
echo "== $FILES files of $SIZE_MB MB, encrypt --local then decrypt --local, $RUNS runs, ${BIN:-tree $(git rev-parse --short HEAD)$(git diff --quiet || echo +changes)}, load $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$RUNS"); do
  t0=$(date +%s.%N)
  for i in $(seq "$FILES"); do
    "$work/cipherd" encrypt --local --key default -i "$work/in$i" -o "$work/sealed$i"
  done
  for i in $(seq "$FILES"); do
    "$work/cipherd" decrypt --local -i "$work/sealed$i" -o "$work/out$i"
  done
  t1=$(date +%s.%N)
  for i in $(seq "$FILES"); do cmp -s "$work/in$i" "$work/out$i" || { echo "file $i did not round-trip" >&2; exit 1; }; done
  awk -v t0="$t0" -v t1="$t1" -v r="$r" 'BEGIN {printf "run %d: %.2f s\n", r, t1 - t0}' | tee -a "$work/runs"
  rm -f "$work"/sealed* "$work"/out*
  sync
done
awk '{print $3}' "$work/runs" | sort -n | awk '{v[NR] = $1} END {
  m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
  printf "median %.2f s (%.2f–%.2f), %d runs\n", m, v[1], v[NR], NR
}'
