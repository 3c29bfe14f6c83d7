#!/usr/bin/env bash
# One call of a lent GPU machine (at most 600 s a command), from the repository root:
#   DEADLINE_S=540 bash docs/results/pong/gpu.sh
#     1. the GPU tests: the CUDA graph equals the eager update, the greedy action (staged, and graphed) the plain
#        forward's, the device frame ring equals the host's on the same draws, the graph fed from device stacks
#        with its results read one update late, the stacked torch engine (a cohort's update, acting and scores)
#        equal to each member's own on CUDA (tests.txt);
#     2. the loop benchmark (benchmarks/atari_throughput.py at the runs' ε, EPS (0.01): pong_fast_per at one update
#        per agent step as before, with replay.device_frames, with it and train.priority_lag, and that without the
#        i.i.d. measures, whose host gather is left on the host's path; then that last one's learning under
#        cProfile: where the host's time goes) and the update one (benchmarks/cuda_update.py, with a greedy action
#        after each update, eager and graphed);
#        with COHORT=1, a 10-seed MinAtar Breakout cohort with agent.cuda_graph true (each member's graphed update,
#        one after another: the stacked path refuses capturable optimizers) and false (one stacked update), timed;
#        each phase starts only where it leaves the runs RUN_MIN_S (120) seconds;
#     3. pong_fast_uniform and pong_fast_per (seed 1) side by side until MARGIN_S (120) before DEADLINE_S (seconds
#        from this script's start), then SIGTERM (`interrupted`, resumable: a checkpoint every CKPT_EVERY steps);
#     4. into $OUT (at most 8 files of 16 MiB, 64 MiB in all, 2 folders deep, come back): gpu.log (this output),
#        runs.tgz (each run's summary.json, metrics.csv, TensorBoard events, config.yaml and console log; the
#        tests' and benchmarks' output), ckpt.tar.part-NN (the latest checkpoints, split at 15 MiB).
#   RESUME=1 DEADLINE_S=... bash docs/results/pong/gpu.sh   # a second call: the runs continue from their latest
#     checkpoints (on a machine still warm, runs/gpu is still there; else RESUME_FROM=DIR names a folder of the
#     repository, carried (runs/carry: ignored), holding a previous call's runs.tgz and ckpt.tar.part-*), no tests
#     or benchmarks unless TESTS=1 / BENCH_STEPS / UPDATES ask for them; EXTRA_SETS passes resumable keys
#     (train, log, metrics) on, e.g. EXTRA_SETS=metrics.iid=false.
#   CONFIGS="pong_fast_per" ...   # the configs run side by side (default: pong_fast_uniform pong_fast_per)
# Rehearsal without a GPU (DEVICE=cpu: the CUDA tests skip, the graph is off, tiny budgets):
#   DEVICE=cpu STEPS=100000 LEARN_FROM=200 CKPT_EVERY=200 EXTRA_SETS=log.every=50 DEADLINE_S=420 MARGIN_S=30 \
#       BENCH_STEPS=0 UPDATES=2 ROUNDS=1 OUT=/tmp/gpu-out bash docs/results/pong/gpu.sh
# A checkpoint holds the i.i.d. measures' batch states since the last log point (log.every = 1,000 updates: up to
# 0.9 GB): keep checkpoints on log points (the defaults: learning from 10^4, a checkpoint every 10^4 steps).
# Gymnasium and ale-py (and MinAtar for COHORT=1: `pip download minatar==1.0.15 --no-deps -d .whl`) travel as
# wheels in .whl/ (the machine has no registry access; docs/results/pong/README.md).
set -u
shopt -s nullglob
START=$SECONDS
DEVICE=${DEVICE:-cuda}
DEADLINE_S=${DEADLINE_S:-540}
MARGIN_S=${MARGIN_S:-120}
STEPS=${STEPS:-1000000}         # train.total_steps of the runs (the configs' budget)
LEARN_FROM=${LEARN_FROM:-}      # train.learning_starts (empty: the configs' 10^4)
CKPT_EVERY=${CKPT_EVERY:-10000}
RESUME=${RESUME:-0}
FIRST=$([ "$RESUME" = 0 ] && echo 1 || echo 0)  # a first call tests and benchmarks by default, a resume does not
BENCH_STEPS=${BENCH_STEPS:-$((3000 * FIRST))}  # atari_throughput's steps (0: skip it); it learns from step 1000
EPS=${EPS:-0.01}                # atari_throughput's fixed ε (a long run spends most of its steps at eps_end)
UPDATES=${UPDATES:-$((300 * FIRST))}  # cuda_update's updates per round (0: skip it)
ROUNDS=${ROUNDS:-3}             # cuda_update's rounds
TESTS=${TESTS:-$FIRST}          # 0: no tests (the runs keep the configs' settings)
COHORT=${COHORT:-0}             # 1: a MinAtar cohort, members graphed one by one against the stacked update
COHORT_STEPS=${COHORT_STEPS:-5000}
read -r -a CONFIGS <<<"${CONFIGS:-pong_fast_uniform pong_fast_per}"
OUT=${OUT:-/tmp/out}
RUNS=runs/gpu
SEED=1
mkdir -p "$OUT" "$RUNS"
exec > >(tee -a "$OUT/gpu.log") 2>&1
TEE_PID=$!
if [ -d .whl ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
        >/dev/null 2>&1 || echo "wheels in .whl/ did not install"
    export PYTHONPATH=/tmp/site:$PWD
else
    export PYTHONPATH=$PWD
fi
export PYTHONUNBUFFERED=1
log() { echo "=== $(date +%T) +$((SECONDS - START))s $*"; }
left() { echo $((DEADLINE_S - (SECONDS - START))); }

log "machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), deadline +${DEADLINE_S}s, runs stop at +$((DEADLINE_S - MARGIN_S))s"
[ "$DEVICE" = cuda ] && nvidia-smi -L
python3 -c "import torch, gymnasium, ale_py, numba, numpy; print('torch', torch.__version__, torch.cuda.is_available() and torch.cuda.get_device_name(), 'numba', numba.__version__, 'numpy', numpy.__version__, 'gymnasium', gymnasium.__version__, 'ale_py', ale_py.__version__)" || exit 1

# the settings of the runs: the configs' own (graph, device frames, lag), turned off where a GPU test failed
SETS=(--set "train.checkpoint_every=$CKPT_EVERY" --set "train.total_steps=$STEPS")
[ -n "$LEARN_FROM" ] && SETS+=(--set "train.learning_starts=$LEARN_FROM")
for extra in ${EXTRA_SETS:-}; do SETS+=(--set "$extra"); done  # e.g. log.every=50 (space-separated KEY=VALUE)
# a phase before the runs starts only where it leaves the runs RUN_MIN_S (120) before the margin
RUN_MIN_S=${RUN_MIN_S:-120}
time_for() { [ $(( $(left) - MARGIN_S - RUN_MIN_S )) -ge "$1" ]; }
RESUME_SETS=(--set "train.total_steps=$STEPS")  # a resume may change train, log and metrics keys and agent.cuda_graph
for extra in ${EXTRA_SETS:-}; do RESUME_SETS+=(--set "$extra"); done
if [ "$TESTS" != 0 ] && time_for 120; then
    log "tests: the CUDA graphs (update, greedy action); the device frame ring and the lagged graph (tests.txt)"
    timeout 100 python3 -m pytest -q -p no:cacheprovider tests/rl/test_cuda_graph.py tests/rl/test_acting.py \
        -k "not device_stacks" >"$RUNS/tests.txt" 2>&1
    GRAPH_RC=$?
    timeout 100 python3 -m pytest -q -p no:cacheprovider tests/replay/test_device_frames.py \
        tests/rl/test_cuda_graph.py -k "device" >>"$RUNS/tests.txt" 2>&1
    FAST_RC=$?
    timeout 60 python3 -m pytest -q -p no:cacheprovider tests/rl/test_stacked.py -k cuda >>"$RUNS/tests.txt" 2>&1
    log "the stacked torch engine on CUDA (a cohort's update, acting, scores): rc $?"
    grep -E "passed|failed|error" "$RUNS/tests.txt"
    [ $GRAPH_RC = 0 ] || SETS+=(--set agent.cuda_graph=false) RESUME_SETS+=(--set agent.cuda_graph=false)
    [ $FAST_RC = 0 ] || SETS+=(--set replay.device_frames=false --set train.priority_lag=0)
    log "graph tests rc $GRAPH_RC, device-frame and lag tests rc $FAST_RC; the runs take: ${SETS[*]}"
    [ "$RESUME" = 1 ] && [ $FAST_RC != 0 ] && log "(a resume keeps its checkpoint's device frames and lag)"
fi
if [ "$COHORT" != 0 ] && time_for 150; then
    log "benchmark: a 10-seed breakout-minatar_uniform cohort, each member graphed vs stacked (cohort.txt)"
    for graph in true false; do
        began=$SECONDS
        timeout 70 python3 -m per_cli train --config breakout-minatar_uniform --seeds 1-10 --device "$DEVICE" \
            --set train.learning_starts=1000 --set "train.total_steps=$COHORT_STEPS" --set train.eval_episodes=0 \
            --set "agent.cuda_graph=$graph" --runs-dir "/tmp/per-cohort-$graph" >>"$RUNS/cohort.txt" 2>&1
        echo "agent.cuda_graph=$graph: rc $?, $((SECONDS - began)) s for 10 x $COHORT_STEPS steps" | tee -a "$RUNS/cohort.txt"
    done
fi
if [ "$BENCH_STEPS" != 0 ] && time_for 120; then
        log "benchmark: pong_fast_per learning at one update per step, before and after (bench_loop.txt)"
        timeout 150 python3 benchmarks/atari_throughput.py --device "$DEVICE" --config pong_fast_per \
            --capacity 10000 --steps "$BENCH_STEPS" --learning-starts 1000 --repeats 1 --kinds prioritized --eps "$EPS" \
            --set replay.device_frames=false --set train.priority_lag=0 \
            --variant frames:replay.device_frames=true --variant fast:replay.device_frames=true,train.priority_lag=1 \
            --variant fast-noiid:replay.device_frames=true,train.priority_lag=1,metrics.iid=false --profile fast-noiid \
            --runs-dir /tmp/per-atari-throughput 2>&1 | tee "$RUNS/bench_loop.txt" | tail -11
fi
if [ "$UPDATES" != 0 ] && time_for 60; then
    log "benchmark: one Pong update: eager, graphed, from device frames, read late, with an action (bench_update.txt)"
    timeout 90 python3 benchmarks/cuda_update.py --device "$DEVICE" --updates "$UPDATES" --rounds "$ROUNDS" \
        2>&1 | tee "$RUNS/bench_update.txt" | tail -9
fi
if [ "$RESUME" = 1 ] && [ -n "${RESUME_FROM:-}" ] && [ ! -d "$RUNS/${CONFIGS[0]}__s$SEED" ]; then
    log "restoring the runs from $RESUME_FROM"
    tar xzf "$RESUME_FROM/runs.tgz" && cat "$RESUME_FROM"/ckpt.tar.part-* | tar x || exit 1
fi
for cfg in "${CONFIGS[@]}"; do
    if [ "$RESUME" = 1 ] && [ ! -f "$RUNS/${cfg}__s$SEED/checkpoints/latest" ]; then
        # (a machine left idle past its warm time is given back: a later call lands on a bare one)
        log "RESUME=1 but $RUNS holds no checkpoint of $cfg (a bare machine?): carry one and name RESUME_FROM"
        exit 1
    fi
done

log "Pong: ${CONFIGS[*]} until +$((DEADLINE_S - MARGIN_S))s"
PIDS=()
for cfg in "${CONFIGS[@]}"; do
    name=${cfg}__s$SEED
    if [ "$RESUME" = 1 ]; then
        what=(--resume "$RUNS/$name" "${RESUME_SETS[@]}")
    else
        rm -rf "${RUNS:?}/$name"
        what=(--config "$cfg" --seed $SEED --runs-dir $RUNS --name "$name" "${SETS[@]}")
    fi
    OMP_NUM_THREADS=2 setsid nohup python3 -m per_cli train "${what[@]}" --device "$DEVICE" \
        >>"$RUNS/$name.log" 2>&1 </dev/null &
    PIDS+=($!)
done
running() { for pid in "${PIDS[@]}"; do kill -0 "$pid" 2>/dev/null && return 0; done; return 1; }
progress() {
    for cfg in "${CONFIGS[@]}"; do f=$RUNS/${cfg}__s$SEED.log; echo "$cfg: $(tr '\r' '\n' <"$f" | grep -v '^\s*$' | tail -1)"; done
}
while running && [ "$(left)" -gt "$MARGIN_S" ]; do
    wait_s=$(( $(left) - MARGIN_S )); [ $wait_s -gt 60 ] && wait_s=60
    for _ in $(seq "$wait_s"); do running || break; sleep 1; done  # (a run that exits early ends the wait)
    gpu=""; [ "$DEVICE" = cuda ] && gpu="; GPU $(nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader)"
    echo "--- +$((SECONDS - START))s load $(cut -d' ' -f1-3 /proc/loadavg)$gpu"
    progress
done
if running; then
    log "SIGTERM to the runs (they record \`interrupted\`, resumable from their latest checkpoint)"
    for pid in "${PIDS[@]}"; do kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null; done
    for _ in $(seq 30); do running || break; sleep 1; done
    if running; then
        echo "a run did not stop in 30 s: SIGKILL"
        for pid in "${PIDS[@]}"; do kill -KILL -- "-$pid" 2>/dev/null; done
    fi
fi
progress
for f in "$RUNS"/*/summary.json; do
    python3 -c "import json, sys; s = json.load(open(sys.argv[1])); print(sys.argv[1], {k: s.get(k) for k in ('status', 'total_steps', 'episodes', 'updates', 'steps_per_second')})" "$f"
done

log "collect into $OUT"
tar czf "$OUT/runs.tgz" --exclude=checkpoints "$RUNS"
rm -f "$OUT"/ckpt.tar.part-*
latest=()
for d in "$RUNS"/*/checkpoints; do
    [ -f "$d/latest" ] && latest+=("$d/latest" "$d/$(cat "$d/latest")")
done
if [ ${#latest[@]} -gt 0 ]; then
    tar cf - "${latest[@]}" | split -b 15M -d -a 2 - "$OUT/ckpt.tar.part-"
    total=$(du -cm "$OUT"/* | tail -1 | cut -f1)
    files=$(find "$OUT" -type f | wc -l)
    if [ "$total" -gt 60 ] || [ "$files" -gt 8 ]; then
        echo "the checkpoints do not fit what comes back (${total} MiB, $files files): left out"
        rm -f "$OUT"/ckpt.tar.part-*
    fi
fi
ls -la "$OUT"
log "done, $(left)s before the deadline"
exec 1>&- 2>&-
wait "$TEE_PID"  # (gpu.log complete before the call returns)
