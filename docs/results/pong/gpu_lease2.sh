#!/usr/bin/env bash
# The second GPU lease (15 minutes of device time in all), as one command from the repository root:
#   bash docs/results/pong/gpu_lease2.sh PONG_SECONDS
# 1. the CUDA-graph tests (tests/rl/test_cuda_graph.py), 2. benchmarks/cuda_update.py (eager vs graphed update),
# 3. pong_fast_uniform and pong_fast_per (seed 1) side by side for PONG_SECONDS, then SIGTERM (`interrupted`), with
#    the seed001 CartPole cohort benchmark on the CPU beside them (torch engine, 4 threads),
# 4. the same cohort benchmark on CUDA alone, 5. the run directories (no checkpoints) and logs into $OUT.
# Gymnasium, ale-py and MinAtar travel as wheels in .whl/ (the machine has no registry access).
set -u
PONG_SECONDS=${1:-360}
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    >/dev/null 2>&1 || true
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
log() { echo "=== $(date +%T) $*"; }
RUNS=runs/gpu
mkdir -p $RUNS
log "machine"; nvidia-smi -L; nproc
python3 -c "import torch, gymnasium, ale_py, numba, numpy; print('torch', torch.__version__, torch.cuda.get_device_name(), 'numba', numba.__version__, 'numpy', numpy.__version__, 'gymnasium', gymnasium.__version__, 'ale_py', ale_py.__version__)" || exit 1

log "tests: the graphed update against the eager one"
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/rl/test_cuda_graph.py 2>&1 | tail -25
GRAPH=true
[ "${PIPESTATUS[0]}" = 0 ] || GRAPH=false
log "agent.cuda_graph=$GRAPH for the runs"

log "benchmark: one Pong update, eager vs graphed"
timeout 90 python3 benchmarks/cuda_update.py --updates 400 --rounds 3 2>&1 | tail -6

log "Pong: two runs for $PONG_SECONDS s"
for cfg in pong_fast_uniform pong_fast_per; do
    name=${cfg}__s1
    OMP_NUM_THREADS=2 setsid nohup python3 -m per_cli train --config "$cfg" --seed 1 --device cuda \
        --set agent.cuda_graph=$GRAPH --runs-dir $RUNS --name "$name" >"$RUNS/$name.log" 2>&1 </dev/null &
done
sleep 20
log "cohort benchmark on the CPU (torch engine, 4 threads) beside the Pong runs"
OMP_NUM_THREADS=4 timeout $((PONG_SECONDS - 40)) python3 benchmarks/cohort_throughput.py --sizes 100,1000 --steps 200 \
    --set agent.engine=torch 2>&1 | tail -12 >"$OUT/cohort_cpu.txt" &
end=$((SECONDS + PONG_SECONDS - 20))
while [ $SECONDS -lt $end ]; do
    sleep $(( end - SECONDS < 60 ? end - SECONDS : 60 ))
    echo "--- $(date +%T) load $(cut -d' ' -f1-3 /proc/loadavg); GPU $(nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader)"
    for f in $RUNS/*.log; do echo "$(basename "$f" .log): $(tr '\r' '\n' <"$f" | grep -v '^\s*$' | tail -1)"; done
done
pkill -TERM -f "per_cli train"; sleep 15
for f in $RUNS/*.log; do echo "$(basename "$f" .log): $(tr '\r' '\n' <"$f" | grep -v '^\s*$' | tail -2)"; done
wait
log "cohort benchmark on the CPU:"; cat "$OUT/cohort_cpu.txt"

log "cohort benchmark on CUDA, alone"
timeout 100 python3 benchmarks/cohort_throughput.py --device cuda --sizes 100,1000 --steps 200 2>&1 | tail -12 \
    | tee "$OUT/cohort_cuda.txt"

log "collect"
tar czf "$OUT/pong_lease2.tgz" --exclude=checkpoints $RUNS && ls -la "$OUT"
