#!/bin/bash
# A/B of two scx_gru builds across alternating lab boots: ab.sh NAME LOADS SCHEDS ROUNDS A B [A B ...]
cd /work/main
name=$1 loads=$2 scheds=$3 rounds=$4; shift 4
i=0
for x in "$@"; do
  i=$((i+1))
  cp /tmp/r/scx_gru_$x target/release/scx_gru
  ASA_LAB_ICOUNT=shift=2,sleep=off ORT_DYLIB_PATH=$HOME/.cache/asa/onnxruntime-1.32.0/libonnxruntime.so CI=true \
    cargo run -q --release -p asa-gru-expert --example vm_compare -- --rounds $rounds --seconds 10 \
    --schedulers $scheds --loads $loads --io-timer-disk 100 --out /tmp/r/$name-$i-$x > /tmp/r/$name-$i-$x.log 2>&1
  cmp -s target/release/scx_gru /tmp/r/scx_gru_$x || echo "WARNING: binary rebuilt during $i-$x"
  grep -A30 "geometric mean" /tmp/r/$name-$i-$x/table.md | head -2
done
cp /tmp/r/scx_gru_new target/release/scx_gru
echo done
