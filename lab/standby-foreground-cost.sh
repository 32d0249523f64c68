#!/bin/sh
# Does a loading hot standby cost the foreground? In ONE lab VM, bpfland runs (a foreground
# `asa pin`) and `stress-ng --cpu 2` counts bogo-ops for SECONDS, while a scx_lavd standby
# (the longest load, ~25-45 s of BPF verification under TCG) loads at nice 19, loads at the
# experts' nice -10, or does not exist; the three conditions alternate round by round.
# Writes OUT/results (one line per run: round condition bogo_ops) and OUT/console.log.
#
#   lab/standby-foreground-cost.sh OUT_DIR
#
# Settings (environment): ROUNDS (3), SECONDS_RUN (15), BIN (target/release).
set -eu
OUT=${1:?usage: $0 OUT_DIR}
ROUNDS=${ROUNDS:-3}
SECONDS_RUN=${SECONDS_RUN:-15}
BIN=${BIN:-target/release}
. lab/vm-run.sh
lab_bench_prepare "$OUT" || exit 1
command -v stress-ng > /dev/null || { echo "stress-ng missing on the host: apt-get install stress-ng" >&2; exit 1; }
cat > "$SCRIPT" <<EOF
set -u
run() {
  # \$1 condition name, then asa's standby options
  name=\$1; shift
  asa "\$@" pin bpfland > /dev/null 2>&1 &
  P=\$!
  asa status --wait-for bpfland --timeout 120 > /dev/null || echo "ASA-COST: bpfland did not start"
  sleep 1
  ops=\$(stress-ng --cpu 2 --timeout ${SECONDS_RUN}s --metrics-brief 2>&1 | awk '\$4 == "cpu" { print \$5 }')
  state=\$(asa status | awk '\$1 == "lavd" { print \$4 }')
  echo "\$r \$name \$ops \${state:-none}" >> /lab/out/results
  echo "ASA-COST: round \$r \$name bogo-ops \$ops (standby \${state:-none})"
  kill -INT \$P
  while kill -0 \$P 2> /dev/null; do sleep 0.2; done
  sleep 2
}
# Memory first: MemAvailable (kernel memory of the loaded BPF programs and maps included) with
# bpfland and no standby, then with lavd and rusty parked beside it.
mem() { awk '\$1 == "MemAvailable:" { print \$2 }' /proc/meminfo; }
stop() { kill -INT \$P; while kill -0 \$P 2> /dev/null; do sleep 0.2; done; sleep 2; }
asa --standby 0 pin bpfland > /dev/null 2>&1 &
P=\$!
asa status --wait-for bpfland --timeout 120 > /dev/null
sleep 5
echo "mem none_kib \$(mem)" >> /lab/out/results
stop
asa --standby 2 --standby-experts lavd,rusty pin bpfland > /dev/null 2>&1 &
P=\$!
asa status --wait-for bpfland --timeout 120 > /dev/null
i=0
while [ \$i -lt 240 ] && [ "\$(asa status | awk '\$4 == "parked"' | wc -l)" -lt 2 ]; do sleep 0.5; i=\$((i + 1)); done
sleep 5
echo "mem lavd_rusty_parked_kib \$(mem)" >> /lab/out/results
asa status > /lab/out/status-two-parked.txt
grep mem /lab/out/results | sed 's/^/ASA-COST: /'
stop
r=1
while [ \$r -le $ROUNDS ]; do
  run none --standby 0
  run nice19 --standby-experts lavd --standby-nice 19
  run nice-10 --standby-experts lavd --standby-nice -10
  r=\$((r + 1))
done
EOF
"$BIN/asa-lab" run --asa "$BIN/asa" --expert bpfland,lavd,rusty --tool stress-ng --script "$SCRIPT" \
  --timeout 1800 --out "$OUT" 2>&1 | tee "$OUT/console.log" | grep -a --line-buffered 'ASA-\|asa-lab:' >&2
