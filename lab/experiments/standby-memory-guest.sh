set -u
mem() { echo "$1 $(awk '$1 ~ /^(MemAvailable|MemFree|Cached|Slab|VmallocUsed|Percpu|AnonPages):$/ { printf "%s=%s ", $1, $2 }' /proc/meminfo)" >> /lab/out/mem.txt; }
parked() { i=0; while [ $i -lt 240 ] && [ "$(asa status | awk '$4 == "parked"' | wc -l)" -lt $1 ]; do sleep 0.5; i=$((i + 1)); done; }
stop() { kill -INT $P; while kill -0 $P 2> /dev/null; do sleep 0.2; done; sleep 2; }
for set in none rusty lavd rusty,lavd; do
  if [ $set = none ]; then asa --standby 0 pin bpfland > /dev/null 2>&1 & P=$!; n=0
  else asa --standby 2 --standby-experts $set pin bpfland > /dev/null 2>&1 & P=$!; n=$(echo $set | tr , '\n' | wc -l); fi
  asa status --wait-for bpfland --timeout 120 > /dev/null
  parked $n
  sleep 3
  mem $set
  asa status | grep -A3 '^standby' >> /lab/out/mem.txt
  stop
done
cat /lab/out/mem.txt
