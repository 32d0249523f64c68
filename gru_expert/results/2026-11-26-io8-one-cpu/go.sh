#!/bin/bash
# go.sh OUT "SCHEDS" [extra asa-lab args]: 1-CPU io8 with BPF stats
out=$1; scheds=$2; shift 2
files=""
for s in $scheds; do f=/tmp/prof/scx_gru_${s%%-*}; [ -f $f ] && files="$files --file $f:/lab/$(basename $f)"; done
sed "1i SCHEDS=\"$scheds\"" /tmp/prof/run1cpu-stats.sh > /tmp/prof/cur-$(basename $out).sh
ASA_LAB_ICOUNT=shift=2,sleep=off /work/main/target/release/asa-lab run --script /tmp/prof/cur-$(basename $out).sh --expert gru --rootfs sysbench linux-perf bpftool --file /tmp/prof/timer.sh:/lab/timer.sh --file /work/main/target/release/scx_floor:/lab/scx_floor $files --out /tmp/prof/$out --timeout 1500 "$@" > /tmp/prof/log-$out.txt 2>&1
cat /tmp/prof/$out/summary.txt; python3 /tmp/prof/progdiff.py /tmp/prof/$out
