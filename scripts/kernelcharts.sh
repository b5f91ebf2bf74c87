#!/usr/bin/env bash
# Kernel charts for docs/BENCHMARKS.md: every implementation of each cipher
# (`cipherd speed -impl all`) against `openssl speed -elapsed`, cipher by
# cipher and round by round interleaved, medians of ROUNDS rounds; writes
# tables and SVG charts (internal/benchchart) at 16 KiB and 1 KiB to OUT.
# kernels-raw.tsv has every cell's median and the range of its rounds.
# OPENSSL names the openssl binaries, space-separated, the newest last: the
# ratio columns compare with it (with LD_LIBRARY_PATH for a shared local
# build).
#
#   scripts/kernelcharts.sh                      # ROUNDS=3 SECONDS_PER_CELL=1 OUT=docs/img OPENSSL=openssl
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3}
S=${SECONDS_PER_CELL:-1}
OUT=${OUT:-docs/img}
CIPHERS=${CIPHERS:-"aes-128-gcm aes-256-gcm aes-128-ctr aes-256-ctr chacha20 chacha20-poly1305"}
OPENSSL=${OPENSSL:-openssl}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$OUT"
go build -o "$work/cipherd" ./cmd/cipherd

# Raw rows: cipher, series, size, bytes per second.
for r in $(seq "$ROUNDS"); do
  for c in $CIPHERS; do
    "$work/cipherd" speed -mr -impl all -seconds "$S" -evp "$c" 2>/dev/null | awk -F: -v c="$c" '
      /^\+H:/ { for (i = 2; i <= NF; i++) size[i] = $i }
      /^\+F:/ { split($3, p, "/"); impl = p[2]
                name = impl == "stdlib" ? "Go stdlib" : impl == "xcrypto" ? "Go x/crypto" : "cipherd " impl
                for (i = 4; i <= NF; i++) print c "\t" name "\t" size[i-2] "\t" $i }' >>"$work/raw"
    for o in $OPENSSL; do
      if "$o" speed -mr -elapsed -seconds "$S" -evp "$c" >"$work/ossl" 2>/dev/null; then
        awk -F: -v c="$c" '
          /^\+H:/ { for (i = 2; i <= NF; i++) size[i] = $i }
          /^\+F:/ { for (i = 4; i <= NF; i++) print c "\t" "OpenSSL " v "\t" size[i-2] "\t" $i }' \
          v="$("$o" version | awk '{print $2}')" "$work/ossl" >>"$work/raw"
      fi
    done
    echo "round $r: $c" >&2
  done
done

# Medians of every cell at every size, in bytes per second, then the least
# and greatest round: the source of the charts below and of the tables in
# docs/BENCHMARKS.md (16 B and 64 B as time per message).
awk -F'\t' '{ k = $1 "\t" $2 "\t" $3; n[k]++; v[k, n[k]] = $4; if (!(k in seen)) { seen[k] = 1; order[++m] = k } }
  END { for (j = 1; j <= m; j++) { k = order[j]; c = n[k]
          for (a = 1; a <= c; a++) x[a] = v[k, a]
          for (a = 1; a <= c; a++) for (b = a + 1; b <= c; b++) if (x[b] < x[a]) { t = x[a]; x[a] = x[b]; x[b] = t }
          printf "%s\t%.2f\t%.2f\t%.2f\n", k, c % 2 ? x[(c + 1) / 2] : (x[c / 2] + x[c / 2 + 1]) / 2, x[1], x[c] } }' "$work/raw" >"$OUT/kernels-raw.tsv"
echo "wrote $OUT/kernels-raw.tsv"
# The medians at one size, in GB/s.
table() {
  awk -F'\t' -v size="$1" '$3 == size { printf "%s\t%s\t%.3f\n", $1, $2, $4 / 1e9 }' "$OUT/kernels-raw.tsv"
}
host="$(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo), $(nproc) vCPU"
for spec in "16384 16k 16 KiB" "1024 1k 1 KiB"; do
  read -r size tag label <<<"$spec"
  {
    echo "# title: Cipher kernels, $label messages, one core (higher is better)"
    echo "# unit: GB/s"
    echo "# note: $host; median of $ROUNDS interleaved rounds; scripts/kernelcharts.sh"
    table "$size"
  } >"$OUT/kernels-$tag.tsv"
  go run ./internal/benchchart <"$OUT/kernels-$tag.tsv" >"$OUT/kernels-$tag.svg"
  echo "wrote $OUT/kernels-$tag.tsv and .svg"
done

# The table of docs/BENCHMARKS.md: per cipher and implementation, 16 B and
# 64 B as ns per message, 1 KiB and 16 KiB in GB/s with the rounds' range,
# and the ratios to Go's implementation and to OpenSSL at the same size.
awk -F'\t' '
  { k = $1 "\t" $2; bps[k, $3] = $4; lo[k, $3] = $5; hi[k, $3] = $6
    if (!(k in seen)) { seen[k] = 1; order[++m] = k; cipher[k] = $1; impl[k] = $2 }
    if ($2 ~ /^Go /) gobase[$1] = k
    if ($2 ~ /^OpenSSL /) ossl[$1] = k }
  function ns(k, s) { return sprintf("%.1f ns", s * 1e9 / bps[k, s]) }
  function gbs(k, s) { return sprintf("%.2f GB/s (%.2f–%.2f)", bps[k, s] / 1e9, lo[k, s] / 1e9, hi[k, s] / 1e9) }
  function ratio(k, b, s) { return (b == "" || b == k || bps[b, s] == 0) ? "" : sprintf("%.2f×", bps[k, s] / bps[b, s]) }
  END {
    print "| cipher | implementation | 16 B | 64 B | 1 KiB | 16 KiB | ÷ Go at 16 KiB | ÷ OpenSSL at 16 KiB | ÷ OpenSSL at 1 KiB |"
    print "|---|---|---|---|---|---|---|---|---|"
    for (j = 1; j <= m; j++) { k = order[j]
      name = impl[k] ~ /^cipherd / ? "**" impl[k] "**" : impl[k]
      printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", cipher[k], name, ns(k, 16), ns(k, 64), gbs(k, 1024), gbs(k, 16384),
        impl[k] ~ /^cipherd / ? ratio(k, gobase[cipher[k]], 16384) : "",
        impl[k] ~ /^OpenSSL / ? "" : ratio(k, ossl[cipher[k]], 16384),
        impl[k] ~ /^OpenSSL / ? "" : ratio(k, ossl[cipher[k]], 1024) } }' "$OUT/kernels-raw.tsv" >"$OUT/kernels-table.md"
echo "wrote $OUT/kernels-table.md"
