# Guest script: per-thread CPU time and context switches of ASA and its experts over 30 s on an
# idle machine — cosmos pinned alone (`asa pin`, the supervisor only), then `asa run` in
# per-application mode on cosmos with scx_layered parked as its insurance standby. Writes
# /lab/out/census: "LABEL PID TID COMM UTIME STIME VOLUNTARY INVOLUNTARY" per thread at the
# start (pin0, run0) and end (pin1, run1) of each 30 s, and MemAvailable. Host command (ONNX
# Runtime needs the Debian root filesystem's libraries; the tests' one is cached):
#
#   asa-lab run --script lab/experiments/thread-census-guest.sh --rootfs 7zip,dbus-daemon,iperf3,sysbench,xz-utils \
#     --expert cosmos --expert layered --memory 4096 --out OUT \
#     --file results/2026-11-30-class-rows-60s-mttcg/mapping-load.toml:/lab/table.toml \
#     --file classifier/models/lab/classifier.onnx:/lab/model.onnx \
#     --file classifier/models/default/app-classifier.onnx:/lab/app-model.onnx \
#     --file $(gru_expert/setup_ort.sh):/lab/libonnxruntime.so
set -u
snap() { # label, pids...
  l=$1; shift
  for p in "$@"; do for t in /proc/$p/task/*; do
    [ -r $t/stat ] || continue
    echo "$l $p $(basename $t) $(tr ' ' _ < $t/comm) $(awk '{print $14, $15}' $t/stat) $(awk '/^voluntary_ctxt_switches/{v=$2} /^nonvoluntary_ctxt_switches/{n=$2} END{print v, n}' $t/status)"
  done; done
}
pids_of() { for n in "$@"; do pidof $n; done | tr ' ' '\n' | sort -u | tr '\n' ' '; }
mem() { awk '$1 == "MemAvailable:" { print $2 }' /proc/meminfo; }
echo "memavail_kib boot $(mem)" >> /lab/out/census
asa pin cosmos > /lab/out/pin.log 2>&1 &
P=$!
asa status --wait-for cosmos --timeout 120 > /dev/null
sleep 5
echo "memavail_kib pin $(mem)" >> /lab/out/census
ps=$(pids_of asa scx_cosmos)
snap pin0 $ps >> /lab/out/census; sleep 30; snap pin1 $ps >> /lab/out/census
kill -INT $P; while kill -0 $P 2> /dev/null; do sleep 0.2; done; sleep 3
ASA_APP_MODEL=/lab/app-model.onnx asa run --mapping /lab/table.toml --model /lab/model.onnx \
  --onnxruntime /lab/libonnxruntime.so > /lab/out/run.log 2>&1 &
P=$!
i=0
while [ $i -lt 240 ] && ! asa status 2> /dev/null | grep -q parked; do sleep 0.5; i=$((i + 1)); done
asa status > /lab/out/status.txt 2>&1
sleep 10
echo "memavail_kib run $(mem)" >> /lab/out/census
ps=$(pids_of asa scx_cosmos scx_layered)
snap run0 $ps >> /lab/out/census; sleep 30; snap run1 $ps >> /lab/out/census
asa status >> /lab/out/status.txt 2>&1
kill -INT $P; while kill -0 $P 2> /dev/null; do sleep 0.2; done
echo done >> /lab/out/census
