#!/bin/sh
# Issue 40's per-application evaluation in the lab VM, in resumable parts: every scenario of
# the catalogue (the single-phase ones and the phased ones) under the static experts and under
# `asa run` in per-application mode (mapping/lab/live-run.sh with an application model), in
# ROUNDS rounds, each round split into parts of PART_SIZE scenarios, one lab-VM boot per part;
# then the acceptance summary over the rounds (`python -m asa_analysis.per_app_eval`: each
# round counts as one boot, a scenario's cells come from the one part, one boot, that ran it).
#
#   mapping/lab/per-app-eval.sh OUT_DIR TABLE [MODEL]
#
# TABLE: the mapping table `asa run` uses (e.g. the mapping.toml of `asa calibrate --stage
# layers`); MODEL: the load classifier (default classifier/models/lab/classifier.onnx).
# Resumable: a part whose OUT_DIR/roundR/partP/live.json exists is not run again; rerun the
# same command after an interruption (or with PARTS to run only some, e.g. PARTS=1,2 for
# about an hour). Writes OUT_DIR/summary.json and OUT_DIR/summary.txt once every part of
# every round is there. Each part keeps live.json, live.md, mapping.toml and `commit` (the
# source tree's commit when it started, `-dirty` when the tree had changes) in the open and
# packs the rest (results.json, the agent's logs, the console) into its raw.tar.xz, which the
# summary reads.
#
# Settings (environment): ROUNDS (default 2), PART_SIZE (scenarios per part, default 4: 8
# parts of the 32 scenarios, about half an hour each at the defaults; keep it for every part of
# one evaluation), PARTS (the part numbers to
# run, comma-separated; default all), SCENARIOS (default: every scenario of `asa scenario
# list`), EXPERTS (the static experts, default cosmos), BASELINE (default cosmos), APP_MODEL
# (default classifier/models/default/app-classifier.onnx), CLASSIFIER_REPORT (its training
# report, for the held-out class accuracy; default
# results/2026-11-29-app-classifier-own-group/report.json), REPS (per part, default 2),
# DURATION (s, default 60), MIN_PHASE (s, default 20), HOLD (s, default 30), BIN (default
# target/release), and those of live-run.sh (TIMEOUT, MEMORY, ASA_LAB_TCG_THREAD, …).
set -eu
OUT=${1:?usage: $0 OUT_DIR TABLE [MODEL]}
TABLE=${2:?usage: $0 OUT_DIR TABLE [MODEL]}
MODEL=${3:-classifier/models/lab/classifier.onnx}
ROUNDS=${ROUNDS:-2}
PART_SIZE=${PART_SIZE:-4}
PARTS=${PARTS:-}
BIN=${BIN:-target/release}
EXPERTS=${EXPERTS:-cosmos}
BASELINE=${BASELINE:-cosmos}
APP_MODEL=${APP_MODEL:-classifier/models/default/app-classifier.onnx}
CLASSIFIER_REPORT=${CLASSIFIER_REPORT:-results/2026-11-29-app-classifier-own-group/report.json}
REPS=${REPS:-2}
DURATION=${DURATION:-60}
MIN_PHASE=${MIN_PHASE:-20}
HOLD=${HOLD:-30}
SCENARIOS=${SCENARIOS:-$("$BIN/asa" scenario list | awk 'NR > 1 {print $1}' | paste -sd, -)}
for f in "$TABLE" "$MODEL" "$APP_MODEL" "$CLASSIFIER_REPORT"; do
  [ -s "$f" ] || { echo "$f: missing or empty" >&2; exit 1; }
done
[ "$PART_SIZE" -ge 1 ] 2>/dev/null || { echo "PART_SIZE=$PART_SIZE: give a number of scenarios" >&2; exit 1; }
[ "$ROUNDS" -ge 1 ] 2>/dev/null || { echo "ROUNDS=$ROUNDS: give a number of rounds" >&2; exit 1; }

# The parts: PART_SIZE scenarios each, dealt in turn so that the phased scenarios (last in the
# catalogue) spread over the parts rather than filling the last one.
n=$(echo "$SCENARIOS" | tr , '\n' | grep -c .)
nparts=$(( (n + PART_SIZE - 1) / PART_SIZE ))
part_scenarios() { # part number (1-based) -> its scenarios, comma-separated
  echo "$SCENARIOS" | tr , '\n' | grep . | awk -v p="$1" -v k="$nparts" '(NR - 1) % k == p - 1' | paste -sd, -
}
wanted() { [ -z "$PARTS" ] || echo ",$PARTS," | grep -q ",$1,"; }
pack_raw() { # a finished part's folder: everything but the reports into raw.tar.xz
  (cd "$1" && set -- $(ls -A | grep -v -x -e live.json -e live.md -e mapping.toml -e commit -e raw.tar.xz) \
    && if [ $# -gt 0 ]; then tar cJf raw.tar.xz "$@" && rm -rf "$@"; fi)
}
arms=$(( $(echo "$EXPERTS" | tr , '\n' | grep -c .) + 1 ))
per_part_min=$(( PART_SIZE * arms * REPS * (DURATION + HOLD + 25) / 60 + 3 ))
echo "per-application evaluation: $n scenarios in $nparts part(s) of up to $PART_SIZE, $ROUNDS round(s); \
$EXPERTS and asa run, $REPS x ${DURATION}s; about $per_part_min min a part" >&2

mkdir -p "$OUT"
missing=0
r=1
while [ "$r" -le "$ROUNDS" ]; do
  p=1
  while [ "$p" -le "$nparts" ]; do
    dir="$OUT/round$r/part$p"
    if [ -s "$dir/live.json" ]; then
      echo "round $r part $p: $dir/live.json is there, not run again" >&2
    elif wanted "$p"; then
      scen=$(part_scenarios "$p")
      echo "round $r part $p of $nparts ($(date -u +%H:%M) UTC): $scen" >&2
      mkdir -p "$dir"
      git describe --always --dirty --abbrev=40 > "$dir/commit" 2>/dev/null || rm -f "$dir/commit"
      SCENARIOS=$scen EXPERTS=$EXPERTS BASELINE=$BASELINE APP_MODEL=$APP_MODEL REPS=$REPS \
        DURATION=$DURATION MIN_PHASE=$MIN_PHASE HOLD=$HOLD DRY_RUN=0 BIN=$BIN \
        mapping/lab/live-run.sh "$dir" "$TABLE" "$MODEL" || true
      if [ -s "$dir/live.json" ]; then
        pack_raw "$dir" || echo "round $r part $p: packing its raw files failed (left in $dir)" >&2
      else
        echo "round $r part $p brought back no live.json (see $dir)" >&2
        missing=$((missing + 1))
      fi
    else
      missing=$((missing + 1))
    fi
    p=$((p + 1))
  done
  r=$((r + 1))
done
if [ "$missing" -gt 0 ]; then
  echo "$missing part(s) still to run: rerun the same command (PARTS selects parts)" >&2
  exit 0
fi
rounds=
r=1
while [ "$r" -le "$ROUNDS" ]; do rounds="$rounds $(cd "$OUT/round$r" && pwd)"; r=$((r + 1)); done
report=$(cd "$(dirname "$CLASSIFIER_REPORT")" && pwd)/$(basename "$CLASSIFIER_REPORT")
out=$(cd "$OUT" && pwd)
# shellcheck disable=SC2086 # one argument per round
(cd lab/analysis && ../../classifier/.venv/bin/python -m asa_analysis.per_app_eval $rounds \
  --classifier-report "$report" --json "$out/summary.json") > "$OUT/summary.txt"
echo "summary: $OUT/summary.json" >&2
