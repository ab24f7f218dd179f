#!/usr/bin/env bash
# Issue 28's batch work-off beside Asynq's, in one run, interleaved: a
# backlog of N tasks worked off by W workers, Tessera with batch claims and
# batch submits of B (claim → submit, as Asynq's worker fetches and acks),
# Asynq on Redis with appendfsync always, through ../shared/peers' driver.
# Each rep starts fresh servers on fresh data directories.
#
#   bash scripts/workoff-batch.sh                 # N=50000 W=16 B=20 REPS=3
#   N=5000 REPS=1 bash scripts/workoff-batch.sh   # a smoke run
#
# Prints one line per run and the medians; needs redis-server.
set -euo pipefail
N=${N:-50000} W=${W:-16} B=${B:-20} REPS=${REPS:-3}
P=${P:-${TMPDIR:-/tmp}/workoff-batch}
PEERS=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../shared/peers" && pwd)
command -v redis-server >/dev/null || { echo "redis-server not found (apt-get install -y redis-server)"; exit 1; }
mkdir -p "$P"
go build -o "$P/tessera" ./cmd/tessera
(cd "$PEERS" && GOWORK=off go build -o "$P/peers" .)

pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done' EXIT
stop() { kill "$1" 2>/dev/null || true; wait "$1" 2>/dev/null || true; }

asynq() {
  rm -rf "$P/redis" && mkdir -p "$P/redis"
  redis-server --bind 127.0.0.1 --port 27399 --protected-mode yes --daemonize no --appendonly yes \
    --appendfsync always --save '' --dir "$P/redis" --logfile "$P/redis.log" &
  local pid=$!; pids+=("$pid")
  "$P/peers" waitport -addr 127.0.0.1:27399
  rm -f "$P/asynq.jsonl"
  "$P/peers" asynq -addr 127.0.0.1:27399 -c "$W" -d 600s -serverpid "$pid" -mode fsync -workoff "$N" \
    -label "asynq workoff" -out "$P/asynq.jsonl" > /dev/null 2> "$P/asynq-driver.log"
  stop "$pid"
  python3 -c 'import json,sys; r=[json.loads(l) for l in open(sys.argv[1])][-1]; print("%.0f %.3f %s" % (r["tasks_per_s"], r["server_cpu_s_per_1k_tasks"], r["verified"]))' "$P/asynq.jsonl"
}

tessera() {
  rm -rf "$P/data"
  local key=tsk_workoff_$(od -An -N24 -tx1 /dev/urandom | tr -d ' \n')
  TESSERA_ADMIN_KEY=$key "$P/tessera" serve --addr 127.0.0.1:27788 --data "$P/data" \
    --claim-rate 1000000 --claim-burst 1000000 --claim-concurrency 100000 > "$P/tessera.log" 2>&1 &
  local pid=$!; pids+=("$pid")
  "$P/peers" waitport -addr 127.0.0.1:27788 -http /healthz -t 60s
  "$P/tessera" bench load --url http://127.0.0.1:27788 --key "$key" --pid "$pid" --workers "$W" \
    --backlog "$N" --batch "$B" --heartbeat=false --noop-duration 2s --json > "$P/tessera.json" 2> "$P/tessera-bench.log"
  stop "$pid"
  python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); c=r.get("cpu_per_call") or {}; print("%.0f %.3f %s" % (r["tasks_per_second"], c.get("server_us", 0)/1000, r["verify"]["pass"]))' "$P/tessera.json"
}

echo "run            tasks/s  server ms/task  verified"
a=() t=()
for rep in $(seq 1 "$REPS"); do
  read -r rate cpu ok < <(asynq); a+=("$rate"); echo "asynq r$rep      $rate  $cpu  $ok"
  read -r rate cpu ok < <(tessera); t+=("$rate"); echo "tessera B=$B r$rep  $rate  $cpu  $ok"
done
median() { printf '%s\n' "$@" | sort -n | awk '{v[NR]=$1} END {print (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'; }
ma=$(median "${a[@]}") mt=$(median "${t[@]}")
echo "median: asynq $ma tasks/s, tessera (batches of $B) $mt tasks/s, ratio $(awk -v t="$mt" -v a="$ma" 'BEGIN{printf "%.2f", t/a}')"
