#!/bin/sh
# Records training traces in the lab VM under the kernel's default scheduler
# (EEVDF): gru_record runs while one stress-ng load at a time runs for 8 s.
# Usage: train/record_in_vm.sh OUT_DIR   (from the repository root, after
#        `cargo build -p asa-gru-expert -p asa-lab`; needs stress-ng on the host)
set -eu
out=${1:?usage: record_in_vm.sh OUT_DIR}
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
strip -o "$bin/gru_record" target/debug/gru_record
PATH="$bin:$PATH" target/debug/asa-lab run --tool gru_record --tool stress-ng --timeout 300 --out "$out" -c '
run() { name=$1; shift
  gru_record --out /lab/out/trace-$name.csv --label "vm $name: stress-ng $*" > /lab/out/rec-$name.log 2>&1 & R=$!
  sleep 1; stress-ng "$@" --timeout 8 --metrics-brief > /lab/out/stress-$name.log 2>&1; sleep 0.5
  kill -INT $R; wait $R; tail -1 /lab/out/rec-$name.log; }
run cpu --cpu 2
run cpu1 --cpu 1
run switch --switch 2
run io --hdd 1 --hdd-bytes 16M --io 1
run sock --sock 2
run mixed --cpu 1 --switch 1 --hdd 1 --hdd-bytes 16M
'
