#!/usr/bin/env bash
# /speed against `cipherd speed`: starts `cipherd serve`, waits for its
# refined start-up table, then measures the same ciphers with
# `cipherd speed -impl all -seconds 1` (ROUNDS times, interleaved cipher by
# cipher), and prints every cell's ratio /speed ÷ median cipherd speed, with
# the count of cells within 10 %. Needs jq.
#
#   scripts/speedcheck.sh                   # ROUNDS=1 CIPHERS="aes-128-gcm aes-256-gcm chacha20-poly1305 aes-128-ctr"
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-1}
CIPHERS=${CIPHERS:-"aes-128-gcm aes-256-gcm chacha20-poly1305 aes-128-ctr"}
PORT=${PORT:-18480}
work=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"' EXIT
go build -o "$work/cipherd" ./cmd/cipherd

if curl -s -o /dev/null "http://127.0.0.1:$PORT/"; then
  echo "port $PORT is taken: set PORT" >&2
  exit 1
fi
"$work/cipherd" serve -addr "127.0.0.1:$PORT" -data-dir "$work/data" -log-level warn 2>"$work/serve.log" &
pid=$!
start=$(date +%s)
until [ "$(curl -fsS "http://127.0.0.1:$PORT/speed?format=json" 2>/dev/null | jq -r '.table_quality // empty')" = refined ]; do
  kill -0 "$pid" 2>/dev/null || { echo "cipherd serve exited:" >&2; cat "$work/serve.log" >&2; exit 1; }
  [ $(($(date +%s) - start)) -lt 600 ] || { echo "no refined table in 600 s" >&2; exit 1; }
  sleep 2
done
curl -fsS "http://127.0.0.1:$PORT/speed?format=json" >"$work/speed.json"
echo "/speed: $(jq -r .table_method "$work/speed.json"); refined $(($(date +%s) - start)) s after start; median cell spread $(jq -r '.table_median_spread * 100 | floor' "$work/speed.json") %" >&2
kill "$pid"; wait "$pid" 2>/dev/null || true

# cipher/impl/size and bytes per second, from /speed and from cipherd speed.
jq -r '.table.rows[] | .cipher as $c | .impl as $i | .cells[] | "\($c)/\($i)\t\(.size)\t\(.bytes_per_second)"' "$work/speed.json" >"$work/page"
for r in $(seq "$ROUNDS"); do
  for c in $CIPHERS; do
    "$work/cipherd" speed -mr -impl all -seconds 1 -evp "$c" 2>/dev/null | awk -F: '
      /^\+H:/ { for (i = 2; i <= NF; i++) size[i] = $i }
      /^\+F:/ { for (i = 4; i <= NF; i++) print $3 "\t" size[i-2] "\t" $i }' >>"$work/cli"
  done
done
awk -F'\t' '
  NR == FNR { k = $1 "\t" $2; n[k]++; v[k, n[k]] = $3; next }
  ($1 "\t" $2) in n {
    k = $1 "\t" $2; c = n[k]
    for (a = 1; a <= c; a++) x[a] = v[k, a]
    for (a = 1; a <= c; a++) for (b = a + 1; b <= c; b++) if (x[b] < x[a]) { t = x[a]; x[a] = x[b]; x[b] = t }
    med = c % 2 ? x[(c + 1) / 2] : (x[c / 2] + x[c / 2 + 1]) / 2
    ratio = $3 / med; total++; if (ratio >= 0.9 && ratio <= 1.1) within++
    printf "%-32s %6d bytes  /speed %10.1f MB/s  cipherd speed %10.1f MB/s  ratio %.3f\n", $1, $2, $3 / 1e6, med / 1e6, ratio
  }
  END { printf "%d of %d cells within 10 %%\n", within, total }' "$work/cli" "$work/page"
