#!/bin/sh
# One I/O thread and one CPU hog, each pinned, in the lab VM: does it matter which vCPU takes
# which? Boots the lab VM once under one emulation mode and runs asa-gru-compare's io load
# (sysbench fileio, random read/write, O_DIRECT, on the 100 us timer disk) pinned with taskset
# to one vCPU, beside `sysbench cpu --threads=1` pinned to the other, or alone; 8 s each, every
# case twice. The guest's lines (io_cpu=.. hog_cpu=.. io_events_per_s=.. hog_events_per_s=..)
# go to OUT/summary.txt, its sysbench outputs to OUT/io-*.txt and OUT/hog-*.txt.
#
# Usage (needs a release build of asa-lab: cargo build --release -p asa-lab):
#   lab/experiments/vcpu-asymmetry.sh OUT
# with the mode in the environment as for every lab run: ASA_LAB_ICOUNT=shift=2,sleep=off
# (single-threaded TCG, instruction counting), ASA_LAB_TCG_THREAD=multi (MTTCG), or neither
# (single-threaded TCG in real time, the lab's default).
#
# OUT is a scratch folder (created if missing). To keep a result, commit it under
# results/<date>-<question>/ (README.md with what was run and what it shows, summary-MODE.txt,
# raw logs packed in raw.tar.xz), as results/2026-11-27-lab-vcpu0-takes-interrupts-first/ did.
set -eu
out=${1:?usage: lab/experiments/vcpu-asymmetry.sh OUT}
mkdir -p "$out"
out=$(cd "$out" && pwd)
# Paths below are the repository's: run from its root wherever this is called from.
cd "$(dirname "$0")/../.."
script=$(mktemp)
trap 'rm -f "$script"' EXIT
# The lab's timer disk (null_blk, 100 us timer completions), as asa-gru-compare makes it.
sed -n '/^pub const TIMER_DISK_SH: &str = r#"/,/^"#;/p' lab/src/timer_disk.rs | sed '1d;$d' > "$script"
cat >> "$script" <<'GUEST'
set -u
out=/lab/out; mkdir -p $out
timer_disk /root/sb 100000 512 > /dev/null || exit 5
cd /root/sb && sysbench fileio --file-total-size=64M --file-num=8 prepare > /dev/null 2>&1 || exit 3
FIO="--file-total-size=64M --file-num=8 --file-test-mode=rndrw --file-extra-flags=direct"
S=8
# one IO_CPU HOG_CPU|- TAG: sysbench fileio (asa-gru-compare's io load) pinned to IO_CPU,
# beside sysbench cpu --threads=1 pinned to HOG_CPU (or alone).
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
