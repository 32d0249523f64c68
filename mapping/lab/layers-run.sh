#!/bin/sh
# Calibration stage layers in the lab VM, across boots: the candidate layer plans of CANDIDATES
# (an expert catalogue, e.g. one `asa calibrate --stage layers` wrote) beside their reference,
# every application in its labelled class's layer (oracle hints), in BOOTS lab-VM boots, then
# `asa calibrate --stage layers` on all of them: a row's verdict pairs each candidate with its
# reference within a boot and needs the gain in every boot's differences (2 standard errors of
# the per-boot differences), so it needs two boots or more (mapping/README.md).
#
#   mapping/lab/layers-run.sh OUT_DIR CANDIDATES
#
# Resumable: a boot whose OUT_DIR/bootN/results.json exists is not run again.
# Settings (environment): BOOTS (default 2), SCENARIOS (default S10,S1,S25), EXPERTS (the
# candidates and their reference, names of CANDIDATES; default: every BPF expert it has),
# LAYER_CLASSES (`--layer-classes`; default asa calibrate's), LAYER_BASE (`--layer-base`: the
# table CANDIDATES was written from, e.g. by `asa calibrate --stage layers --candidates-only
# --layer-base T`; default none), REPS (per boot, default 2),
# DURATION (s, default 60), HOLD (s, default 30), BIN (default target/release), ROOTFS (the
# guest packages; default every scenario's, so the work disk with the loads' prepared inputs is
# the other full runs'), and those of scenarios/lab/full-run.sh (MEMORY, TIMEOUT,
# ASA_LAB_TCG_THREAD, ASA_LAB_CPUS, …). Writes
# OUT_DIR/calibration/ (candidates.toml, layers.md, the table's [[layer]] rows).
set -eu
OUT=${1:?usage: $0 OUT_DIR CANDIDATES}
CANDIDATES=${2:?usage: $0 OUT_DIR CANDIDATES}
BOOTS=${BOOTS:-2}
SCENARIOS=${SCENARIOS:-S10,S1,S25}
REPS=${REPS:-2}
DURATION=${DURATION:-60}
HOLD=${HOLD:-30}
BIN=${BIN:-target/release}
LAYER_CLASSES=${LAYER_CLASSES:-}
LAYER_BASE=${LAYER_BASE:-}
ROOTFS=${ROOTFS:-$("$BIN/asa" scenario packages all)}
export ROOTFS
[ "$BOOTS" -ge 1 ] 2>/dev/null || { echo "BOOTS=$BOOTS: give a number of boots, 2 or more for verdicts" >&2; exit 1; }
EXPERTS=${EXPERTS:-$("$BIN/asa" --catalogue "$CANDIDATES" experts | awk 'NR > 1 && $1 != "eevdf" {print $1}' | paste -sd, -)}
[ -n "$EXPERTS" ] || { echo "no expert in $CANDIDATES" >&2; exit 1; }
mkdir -p "$OUT"
results=
b=1
while [ "$b" -le "$BOOTS" ]; do
  boot="$OUT/boot$b"
  if [ -s "$boot/results.json" ]; then
    echo "boot $b of $BOOTS: $boot/results.json is there, not run again" >&2
  else
    echo "boot $b of $BOOTS: $SCENARIOS x $EXPERTS, $REPS x ${DURATION}s each" >&2
    CATALOGUE=$CANDIDATES SCENARIOS=$SCENARIOS EXPERTS=$EXPERTS REPS=$REPS DURATION=$DURATION \
      HOLD=$HOLD ORDER=interleaved RECORD_APPS=0 ORACLE_HINTS=1 BIN=$BIN \
      scenarios/lab/full-run.sh "$boot"
    [ -s "$boot/results.json" ] || { echo "boot $b brought back no results.json (see $boot)" >&2; exit 1; }
  fi
  results="$results${results:+,}$boot/results.json"
  b=$((b + 1))
done
mkdir -p "$OUT/calibration"
cp "$CANDIDATES" "$OUT/calibration/candidates.toml"
"$BIN/asa" calibrate --stage layers --dir "$OUT/calibration" --from-results "$results" \
  ${LAYER_CLASSES:+--layer-classes "$LAYER_CLASSES"} ${LAYER_BASE:+--layer-base "$LAYER_BASE"}
echo "layer rows across $BOOTS boots: $OUT/calibration" >&2
