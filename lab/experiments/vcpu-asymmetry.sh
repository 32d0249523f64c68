#!/bin/sh
# One I/O thread and one CPU hog, each pinned, in the lab VM: does it matter which vCPU takes
# which? Runs the guest script below under one emulation mode and writes OUT/summary.txt.
#
# Usage (from the repository root, release build of asa-lab):
#   gru_expert/results/2026-11-27-lab-vcpu-asymmetry/run.sh OUT
# with the mode in the environment as for every lab run: ASA_LAB_ICOUNT=shift=2,sleep=off
# (single-threaded TCG, instruction counting), ASA_LAB_TCG_THREAD=multi (MTTCG), or neither
# (single-threaded TCG in real time, the lab's default).
set -eu
out=${1:?usage: run.sh OUT}
script=$(mktemp)
trap 'rm -f "$script"' EXIT
# The lab's timer disk (null_blk, 100 us timer completions), as vm_compare makes it.
sed -n '/^pub const TIMER_DISK_SH: &str = r#"/,/^"#;/p' lab/src/timer_disk.rs | sed '1d;$d' > "$script"
cat >> "$script" <<'GUEST'
set -u
out=/lab/out; mkdir -p $out
timer_disk /root/sb 100000 512 > /dev/null || exit 5
cd /root/sb && sysbench fileio --file-total-size=64M --file-num=8 prepare > /dev/null 2>&1 || exit 3
FIO="--file-total-size=64M --file-num=8 --file-test-mode=rndrw --file-extra-flags=direct"
S=8
# one IO_CPU HOG_CPU|- TAG: sysbench fileio (vm_compare's io load) pinned to IO_CPU, beside
# sysbench cpu --threads=1 pinned to HOG_CPU (or alone).
one() {
  if [ "$2" != - ]; then taskset -c $2 sysbench cpu --threads=1 --time=$S run > $out/hog-$3.txt 2>&1 & fi
  taskset -c $1 sysbench fileio $FIO --threads=1 --time=$S run > $out/io-$3.txt 2>&1
  wait
  io=$(awk '/total number of events/ {e=$NF} /total time:/ {t=$NF} END {sub("s","",t); printf "%.1f", e/t}' $out/io-$3.txt)
  hog=-; [ "$2" != - ] && hog=$(grep -o 'events per second: *[0-9.]*' $out/hog-$3.txt | grep -o '[0-9.]*$')
  echo "io_cpu=$1 hog_cpu=$2 io_events_per_s=$io hog_events_per_s=$hog" | tee -a $out/summary.txt
}
for r in 1 2; do
  one 0 1 a$r; one 1 0 b$r; one 0 - c$r; one 1 - d$r
done
GUEST
./target/release/asa-lab run --script "$script" --rootfs sysbench --out "$out" --timeout 900
