
set -u
out=/lab/out
S=__SECONDS__
FIO="--file-total-size=64M --file-num=8 --file-test-mode=rndrw --file-extra-flags=direct"
measure() {
  s=$1; r=$2; l=$3; shift 3
  lat_start $out/lat-$s-$r-$l.csv
  prof_start $out/prof-$s-$r-$l.txt
  # The snapshots stay outside the timed window (wall time, the scheduler's CPU time).
  progs $out/bpf-$s-$r-$l-0.json
  snap $out/st-$s-$r-$l-0.json
  c0=$(sched_ticks)
  schedstat $out/ss-$s-$r-$l-0.txt
  t0=$(cut -d' ' -f1 /proc/uptime)
  lat_mark $out/lat-$s-$r-$l.span
  thr_start $out/thr-$s-$r-$l.txt
  perf stat -a -e context-switches,cpu-migrations -x, -o $out/perf-$s-$r-$l.txt -- "$@" > $out/load-$s-$r-$l.txt 2>&1
  rc=$?
  thr_stop
  lat_mark $out/lat-$s-$r-$l.span
  t1=$(cut -d' ' -f1 /proc/uptime)
  schedstat $out/ss-$s-$r-$l-1.txt
  c1=$(sched_ticks)
  progs $out/bpf-$s-$r-$l-1.json
  snap $out/st-$s-$r-$l-1.json
  lat_stop
  # (perf report takes seconds under TCG: after every measurement)
  prof_stop $out/prof-$s-$r-$l.txt
  echo "$s $r $l $rc $t0 $t1 $c0 $c1" >> $out/runs.txt
}
# The loads to run (--loads).
LOADS=" __LOADS__ "
want() { case "$LOADS" in *" $1 "*) return 0 ;; esac; return 1; }
loads() {
  s=$1; r=$2
  want cpu1 && measure $s $r cpu1 sysbench cpu --threads=1 --time=$S run
  want cpu8 && measure $s $r cpu8 sysbench cpu --threads=8 --time=$S run
  want io && measure $s $r io sysbench fileio $FIO --threads=1 --time=$S run
  want io8 && measure $s $r io8 sysbench fileio $FIO --threads=8 --time=$S run
  want mixed && measure $s $r mixed sh -c "sysbench cpu --threads=4 --time=$S run > $out/load-$s-$r-mixed-cpu.txt 2>&1 &
    sysbench fileio $FIO --threads=4 --time=$S run > $out/load-$s-$r-mixed-io.txt 2>&1; wait"
  want hackbench && measure $s $r hackbench hackbench -g 4 -l 100
  return 0
}
state() { cat /sys/kernel/sched_ext/state; }
__SCHEDSTAT__
__RECORD__
__PROFILE__
# Every 0.5 s during each load (--thread-samples): the time, each sysbench process's command
# line, and every one of its threads' stat (field 39: the CPU it last ran on), schedstat
# (run ns, wait ns, time slices) and wchan, the same for the ext4 journal threads (jbd2), for
# thread_samples.py. (A profiling run: it cost io8 ~8 % under every scheduler, run 99.)
THREADS=__THREADS__
TP=
thr_start() {
  if [ $THREADS = 1 ]; then
    J=$(grep -l '^jbd2' /proc/[0-9]*/comm 2>/dev/null | cut -d/ -f3)
    ( while :; do
        echo "@ $(cut -d' ' -f1 /proc/uptime)"
        for p in $(pidof sysbench) $J; do
          echo "cmd $p $(tr '\0' ' ' < /proc/$p/cmdline)"
          grep -H '' /proc/$p/task/*/stat /proc/$p/task/*/schedstat /proc/$p/task/*/wchan
        done 2>/dev/null
        sleep 0.5
      done > $1 ) &
    TP=$!
  fi
}
thr_stop() { if [ -n "$TP" ]; then kill $TP; wait $TP 2>/dev/null; TP=; fi; }
# The run time and run count of every BPF program (kernel.bpf_stats_enabled), with --bpf-prog-stats.
BPF_STATS=__BPF_STATS__
progs() { if [ $BPF_STATS = 1 ]; then bpftool -j prog show > $1 2>&1; fi; }
[ $BPF_STATS = 1 ] && { echo 1 > /proc/sys/kernel/bpf_stats_enabled || exit 4; }
# CPU time (utime + stime, all threads, clock ticks) of the scheduler's user-space process.
sched_ticks() { if [ -n "$P" ]; then awk '{print $14 + $15}' /proc/$P/stat; else echo 0; fi; }
waitstate() { i=0; while [ "$(state)" != $1 ] && [ $i -lt 900 ]; do sleep 0.1; i=$((i+1)); done; }
P=
STATS=
# A copy of scx_gru's stats file (rewritten every 0.5 s), around each load.
# (A failed copy is retried once and reported in snap-errors.txt: one copy went missing once.)
snap() {
  if [ -n "$STATS" ]; then
    sleep 0.6
    cp $STATS $1 2>> $out/snap-errors.txt || { sleep 0.3; cp $STATS $1 2>> $out/snap-errors.txt; }
  fi
}
# gru NAME ROUND [ARGS]: scx_gru with ARGS in the background, its stats and log named after NAME.
gru() {
  gru_name=$1; gru_round=$2; shift 2
  STATS=$out/stats-$gru_name-$gru_round.json
  scx_gru "$@" --stats-file $STATS --stats-interval 0.5 \
    > $out/log-$gru_name-$gru_round.txt 2>&1 &
  P=$!
}
# gru_flags VARIANT: scx_gru's options for one variant (gru-burst, gru-wakebal2, ...).
gru_flags() {
  case $1 in
__GRU_FLAGS__    *) echo "unknown scx_gru variant $1" >&2; return 1 ;;
  esac
}
start() {
  STATS=
  case $1 in
    eevdf) P= ;;
    # gru, gru-VARIANT or gru-VARIANT+VARIANT...: the options of every part together.
    gru|gru-*)
      flags= parts=${1#gru}
      for part in $(echo "${parts#-}" | tr + ' '); do
        flags="$flags $(gru_flags gru-$part)" || return 1
      done
      gru $1 $2 $flags ;;
    bpfland) scx_bpfland > $out/log-bpfland-$2.txt 2>&1 & P=$! ;;
    floor) scx_floor > $out/log-floor-$2.txt 2>&1 & P=$! ;;
  esac
  [ -n "$P" ] && waitstate enabled
  echo "# start $1 $2 $(state) $(cat /sys/kernel/sched_ext/root/ops 2>/dev/null)" >> $out/runs.txt
}
stop() {
  echo "# end $1 $2 $(state) $(cat /sys/kernel/sched_ext/root/ops 2>/dev/null)" >> $out/runs.txt
  if [ -n "$P" ]; then kill -INT $P; wait $P; waitstate disabled; fi
}
# --no-thp: no transparent huge pages, so no khugepaged collapsing the loads' memory.
if [ __NO_THP__ = 1 ]; then
  echo never > /sys/kernel/mm/transparent_hugepage/enabled || exit 6
  echo never > /sys/kernel/mm/transparent_hugepage/defrag || exit 6
fi
cat /sys/kernel/mm/transparent_hugepage/enabled > $out/thp.txt 2>&1
__IO_DISK__
cd /root/sb
sysbench fileio --file-total-size=64M --file-num=8 prepare > $out/fileio-prepare.txt 2>&1 || exit 3
getconf CLK_TCK > $out/clk_tck.txt
perf --version > $out/versions.txt; sysbench --version >> $out/versions.txt; uname -r >> $out/versions.txt
loads warmup 0
__ROUNDS__
# The kernel log: a load that stalls (the mixed load's I/O part, ~60 s, now and then under
# every scheduler) may leave a device or hung-task message in it.
dmesg > $out/dmesg.txt 2>&1
