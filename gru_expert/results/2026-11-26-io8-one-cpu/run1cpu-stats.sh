ROUNDS="1"
OFFLINE1=${OFFLINE1:-1}
SCHEDS="${SCHEDS:-eevdf floor gru-fallback}"
ROUNDS="${ROUNDS:-1}"
echo 1 > /proc/sys/kernel/bpf_stats_enabled
[ "$OFFLINE1" = 1 ] && echo 0 > /sys/devices/system/cpu/cpu1/online
nproc > /lab/out/nproc.txt
cp /lab/scx_floor /usr/local/bin/scx_floor; chmod +x /usr/local/bin/scx_floor
out=/lab/out
. /lab/timer.sh
dev=$(timer_disk /root/sb 100000 512) || exit 5
cd /root/sb
sysbench fileio --file-total-size=64M --file-num=8 prepare > /dev/null 2>&1 || exit 3
FIO="--file-total-size=64M --file-num=8 --file-test-mode=rndrw --file-extra-flags=direct"
echo 0 > /proc/sys/kernel/kptr_restrict
echo 1 > /proc/sys/net/core/bpf_jit_kallsyms 2>/dev/null
echo -1 > /proc/sys/kernel/perf_event_paranoid
state() { cat /sys/kernel/sched_ext/state; }
waitstate() { i=0; while [ "$(state)" != $1 ] && [ $i -lt 900 ]; do sleep 0.1; i=$((i+1)); done; }
for s in $SCHEDS; do
  P=
  case $s in
    eevdf) ;;
    gru-fallback) scx_gru --no-model > $out/log-$s.txt 2>&1 & P=$! ;;
    gru-fallback-noaff) scx_gru --no-model --dispatch-affinity-us 0 > $out/log-$s.txt 2>&1 & P=$! ;;
    gru-lean) scx_gru --no-model --dispatch-affinity-us 0 --no-wakeup-preempt --burst-cap-ms 0 > $out/log-$s.txt 2>&1 & P=$! ;;
    gru-noaff) scx_gru --no-model --dispatch-affinity-us 0 > $out/log-$s.txt 2>&1 & P=$! ;;
    gru-nopre) scx_gru --no-model --no-wakeup-preempt > $out/log-$s.txt 2>&1 & P=$! ;;
    [eb][0-9]*) cp /lab/scx_gru_${s%%-*} /tmp/; chmod +x /tmp/scx_gru_${s%%-*}; /tmp/scx_gru_${s%%-*} --no-model $(echo $s | grep -q -- -noaff && echo --dispatch-affinity-us 0) > $out/log-$s.txt 2>&1 & P=$! ;;
    floor) scx_floor > $out/log-$s.txt 2>&1 & P=$! ;;
  esac
  [ -n "$P" ] && waitstate enabled
  echo "$s $(state)" >> $out/states.txt
  for r in $ROUNDS; do
  bpftool -j prog show > $out/progs-$s-$r-before.json 2>&1
  sysbench fileio $FIO --threads=8 --time=10 run > $out/sb-$s-$r.txt 2>&1
  bpftool -j prog show > $out/progs-$s-$r-after.json 2>&1
  echo "$s $r $(grep 'total number of events' $out/sb-$s-$r.txt)" >> $out/summary.txt
  done
  if [ -n "$P" ]; then kill -INT $P; wait $P; waitstate disabled; fi
done
