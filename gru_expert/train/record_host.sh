#!/bin/sh
# Records EEVDF placement traces on the host (no VM): gru_record runs while one load at a
# time runs for $SECS seconds (default 20). Raw traces stay outside git.
# Usage (root, from the repository root, after `cargo build -p asa-gru-expert`):
#   gru_expert/train/record_host.sh /var/tmp/asa-in-kernel-model
set -eu
out=${1:?usage: record_host.sh OUT_DIR}
secs=${SECS:-20}
rec=${GRU_RECORD:-target/debug/gru_record}
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The compile load's small C project, rebuilt in a loop with make -j2.
. "$(dirname "$0")/compile_project.sh"
compile_project "$work"
head -c 64M /dev/urandom | base64 > "$work/blob.txt"

run() { name=$1; shift
  "$rec" --out "$out/trace-$name.csv" --duration $((secs + 2)) --label "host $name: $*" \
    > "$out/rec-$name.log" 2>&1 & R=$!
  sleep 1
  timeout "$secs" sh -c "$*" > "$out/load-$name.log" 2>&1 || true
  wait $R; tail -1 "$out/rec-$name.log"; }

run cpu "stress-ng --cpu 2 --timeout ${secs}"
run cpu1 "stress-ng --cpu 1 --timeout ${secs}"
run switch "stress-ng --switch 2 --switch-freq 2000 --timeout ${secs}"
run io "stress-ng --hdd 1 --hdd-bytes 16M --io 1 --temp-path $work --timeout ${secs}"
run mixed "stress-ng --cpu 1 --switch 1 --switch-freq 1000 --hdd 1 --hdd-bytes 16M --temp-path $work --timeout ${secs}"
run compile "cd $work && while :; do make -s clean; make -s -j2 all; done"
run xz "while :; do xz -T2 -3 -c $work/blob.txt > /dev/null; done"
run sleepwake "for k in 1 2 3 4; do (while :; do sleep 0.002; done) & done; wait"
