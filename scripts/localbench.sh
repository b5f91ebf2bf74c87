#!/usr/bin/env bash
# A file sealed locally against the kernel on one core: each round measures
# `cipherd speed -evp aes-256-gcm -bytes 16384 -seconds 1`, then times
# `cipherd encrypt --local -i FILE -o /dev/null -progress always` (start-up
# and the service call included) on two files of SIZE_MB that hold the
# same bytes and differ only in how the page cache holds them:
#
#   written: written by `head -c`, which leaves it cached in the small
#            folios of its 8 KiB writes, mapped 64 KiB per fault;
#   read:    dropped from the cache (`dd iflag=nocache`), then read once
#            by a seal (not timed), which caches it in 2 MiB folios where
#            the kernel can (MADV_HUGEPAGE), mapped 2 MiB per fault.
#
# Each round prints the kernel's rate, each file's rate, its ratio to the
# kernel, and the seal's user and system time and minor faults
# (/usr/bin/time); the end prints the median and range of each ratio. The
# service runs on a free port with a data directory of its own.
#
# The sealed output goes to /dev/null; with OUT=file it goes to a new file
# beside the inputs, as `-o FILE` writes it, removed (and the removal
# synced) after each seal, untimed.
#
#   ROUNDS=8 scripts/localbench.sh
#   ROUNDS=8 OUT=file scripts/localbench.sh
#   SIZE_MB=256 DIR=/var/tmp scripts/localbench.sh   # where the files go
#
# Needs curl and GNU time (Debian: curl, time).
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-8}
OUT=${OUT:-null}
SIZE_MB=${SIZE_MB:-1024}
PORT=${PORT:-18495}
work=$(mktemp -d "${DIR:-/tmp}/localbench.XXXXXX")
pid=
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

go build -o "$work/cipherd" ./cmd/cipherd
CIPHERD_ADMIN_TOKEN=tok CIPHERD_AEAD=aes-256-gcm CIPHERD_SKIP_BENCHMARK=1 \
  "$work/cipherd" serve -addr 127.0.0.1:$PORT -data-dir "$work/data" >"$work/serve.log" 2>&1 &
pid=$!
for i in $(seq 100); do curl -sf localhost:$PORT/readyz >/dev/null && break; sleep 0.1; done
export CIPHERD_URL=http://127.0.0.1:$PORT CIPHERD_TOKEN=tok

head -c $((SIZE_MB << 20)) /dev/urandom >"$work/written"
cp "$work/written" "$work/read"
sync
dd if="$work/read" iflag=nocache count=0 status=none
seal() { "$work/cipherd" encrypt --local --key default -progress always -i "$1" -o /dev/null 2>/dev/null; }
seal "$work/read"

bytes=$((SIZE_MB << 20))
out=/dev/null
[ "$OUT" = file ] && out="$work/sealed"
echo "== $SIZE_MB MiB sealed locally into $out against cipherd speed -evp aes-256-gcm -bytes 16384 -seconds 1, $ROUNDS rounds, tree $(git rev-parse --short HEAD)$(git diff --quiet || echo +changes), load $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$ROUNDS"); do
  k=$("$work/cipherd" speed -evp aes-256-gcm -bytes 16384 -seconds 1 -mr 2>/dev/null | awk -F: '/^\+F:/ {print $4}')
  line=$(awk -v k="$k" 'BEGIN {printf "kernel %5.2f GB/s", k / 1e9}')
  for f in written read; do
    t0=$(date +%s.%N)
    /usr/bin/time -o "$work/time" -f '%U %S %R' "$work/cipherd" encrypt --local --key default \
      -progress always -i "$work/$f" -o "$out" 2>/dev/null
    t1=$(date +%s.%N)
    if [ "$OUT" = file ]; then rm -f "$out"; sync; fi
    line+=$(awk -v k="$k" -v b=$bytes -v t0="$t0" -v t1="$t1" -v f=$f '{
      bps = b / (t1 - t0)
      printf "  %s %5.2f GB/s (%.2f) user %.2f sys %.2f faults %d", f, bps / 1e9, bps / k, $1, $2, $3
      printf "%s %.4f\n", f, bps / k >>"/dev/stderr"
    }' "$work/time" 2>>"$work/ratios")
  done
  echo "$line"
done
for f in written read; do
  awk -v f=$f '$1 == f {print $2}' "$work/ratios" | sort -n | awk -v f=$f '{v[NR] = $1} END {
    m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
    printf "%-7s ÷ kernel: median %.2f (%.2f–%.2f), %d rounds\n", f, m, v[1], v[NR], NR
  }'
done
