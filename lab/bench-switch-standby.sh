#!/bin/sh
# Switch times with the attach gate and to hot standbys, in ONE lab VM: `asa bench-switch`
# (every ordered pair of EXPERTS, one circuit per round) alternating round by round between
# the attach gate (the target loads while the old expert runs) and --standby-targets (the
# target was parked at its gate beforehand), so drift in the emulator's speed hits both alike.
# Writes OUT/{gate,standby}-r<ROUND>.{json,md} and OUT/console.log.
#
#   lab/bench-switch-standby.sh OUT_DIR
#
# Settings (environment): EXPERTS (default eevdf,bpfland,rusty,lavd), ROUNDS (3),
# MODES ("gate standby"), STOP_GRACE_MS (unset: asa's default; else ASA_STOP_GRACE_MS in the
# guest), BIN (target/release), TIMEOUT (s, 5400).
set -eu
OUT=${1:?usage: $0 OUT_DIR}
EXPERTS=${EXPERTS:-eevdf,bpfland,rusty,lavd}
ROUNDS=${ROUNDS:-3}
BIN=${BIN:-target/release}
TIMEOUT=${TIMEOUT:-5400}
MODES=${MODES:-gate standby}
GRACE=${STOP_GRACE_MS:+export ASA_STOP_GRACE_MS=$STOP_GRACE_MS}
. lab/vm-run.sh
lab_bench_prepare "$OUT" || exit 1
cat > "$SCRIPT" <<EOF
set -u
$GRACE
r=1
while [ \$r -le $ROUNDS ]; do
  for mode in $MODES; do
    echo "ASA-BENCH: round \$r, \$mode"
    flag=""
    [ \$mode = standby ] && flag=--standby-targets
    asa bench-switch --experts $EXPERTS --rounds 1 \$flag \\
      --json /lab/out/\$mode-r\$r.json > /lab/out/\$mode-r\$r.md || echo "ASA-BENCH: failed \$?"
  done
  r=\$((r + 1))
done
EOF
EXPERT_LIST=$(echo "$EXPERTS" | tr , '\n' | grep -v '^eevdf$' | paste -sd, -)
"$BIN/asa-lab" run --asa "$BIN/asa" --expert "$EXPERT_LIST" --script "$SCRIPT" \
  --timeout "$TIMEOUT" --out "$OUT" 2>&1 | tee "$OUT/console.log" | grep -a --line-buffered 'ASA-\|asa-lab:\|round' >&2
