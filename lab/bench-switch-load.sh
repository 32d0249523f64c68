#!/bin/sh
# Switch time under a saturating load, expert start priority A/B, in ONE lab VM: `asa
# bench-switch` (every ordered pair of EXPERTS, one circuit per round) while `stress-ng --cpu 2`
# keeps both vCPUs busy, alternating ASA_EXPERT_NICE values round by round (interleaved, so
# drift in the emulator's speed hits every value alike). Writes OUT/switch-n<NICE>-r<ROUND>.json
# and .md, and OUT/console.log.
#
#   lab/bench-switch-load.sh OUT_DIR
#
# Settings (environment): EXPERTS (default eevdf,bpfland,rusty), NICES (default "0 -10"),
# ROUNDS (3), BIN (target/release), TIMEOUT (s, 3600).
set -eu
OUT=${1:?usage: $0 OUT_DIR}
EXPERTS=${EXPERTS:-eevdf,bpfland,rusty}
NICES=${NICES:-0 -10}
ROUNDS=${ROUNDS:-3}
BIN=${BIN:-target/release}
TIMEOUT=${TIMEOUT:-3600}
. lab/vm-run.sh
lab_bench_prepare "$OUT" || exit 1
command -v stress-ng > /dev/null || { echo "stress-ng missing on the host: apt-get install stress-ng" >&2; exit 1; }
cat > "$SCRIPT" <<EOF
set -u
stress-ng --cpu 2 --timeout 0 > /dev/null 2>&1 &
LOAD=\$!
sleep 3
r=1
while [ \$r -le $ROUNDS ]; do
  for n in $NICES; do
    echo "ASA-BENCH: round \$r, expert nice \$n"
    ASA_EXPERT_NICE=\$n asa bench-switch --experts $EXPERTS --rounds 1 \\
      --json /lab/out/switch-n\$n-r\$r.json > /lab/out/switch-n\$n-r\$r.md || echo "ASA-BENCH: failed \$?"
  done
  r=\$((r + 1))
done
kill \$LOAD
EOF
EXPERT_LIST=$(echo "$EXPERTS" | tr , '\n' | grep -v '^eevdf$' | paste -sd, -)
"$BIN/asa-lab" run --asa "$BIN/asa" --expert "$EXPERT_LIST" --tool stress-ng --script "$SCRIPT" \
  --timeout "$TIMEOUT" --out "$OUT" 2>&1 | tee "$OUT/console.log" | grep -a --line-buffered 'ASA-\|asa-lab:' >&2
