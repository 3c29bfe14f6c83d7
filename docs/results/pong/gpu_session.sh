#!/usr/bin/env bash
# The Pong runs of docs/results/pong/, as run on the lent GPU machine (one H100, 16 cores) from the repository
# root. That machine has torch, numba, typer, rich, tensorboard and opencv but no Gymnasium or ALE, so their
# wheels travel in .whl/ (pip download ... gymnasium==1.4.0 ale-py==0.12.1 farama-notifications minatar==1.0.15).
#   bash docs/results/pong/gpu_session.sh launch    # install, start the runs in the background (setsid)
#   bash docs/results/pong/gpu_session.sh watch N   # print progress every 60 s for N seconds
#   bash docs/results/pong/gpu_session.sh stop      # SIGTERM: each run ends as `interrupted` (resumable)
#   bash docs/results/pong/gpu_session.sh collect   # the run directories (no checkpoints) into $OUT
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    >/dev/null 2>&1 || true
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
RUNS=runs/gpu
RUNSPECS=${RUNSPECS:-"pong_fast_per:1 pong_fast_uniform:1 pong_fast_per:2 pong_fast_uniform:2 pong_per:1"}
case "${1:-}" in
launch)
    nvidia-smi -L
    python3 -c "import torch, gymnasium, ale_py, numba, numpy; print('torch', torch.__version__, torch.cuda.get_device_name(), 'numba', numba.__version__, 'numpy', numpy.__version__, 'gymnasium', gymnasium.__version__, 'ale_py', ale_py.__version__)" || exit 1
    mkdir -p $RUNS
    for spec in $RUNSPECS; do
        cfg=${spec%%:*}; seed=${spec##*:}; name=${cfg}__s${seed}
        OMP_NUM_THREADS=2 setsid nohup python3 -m per_cli train --config "$cfg" --seed "$seed" --device cuda \
            --runs-dir $RUNS --name "$name" >"$RUNS/$name.log" 2>&1 </dev/null &
        echo "started $name (pid $!)"
    done
    ;;
watch)
    end=$((SECONDS + ${2:-60}))
    while [ $SECONDS -lt "$end" ]; do
        sleep $(( end - SECONDS < 60 ? end - SECONDS : 60 ))
        echo "--- $(date +%T) load $(cut -d' ' -f1-3 /proc/loadavg); GPU $(nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader)"
        for log in $RUNS/*.log; do echo "$(basename "$log" .log): $(tr '\r' '\n' <"$log" | grep -v '^\s*$' | tail -1)"; done
    done
    ;;
stop)
    pkill -TERM -f "per_cli train" ; sleep 20
    for log in $RUNS/*.log; do echo "$(basename "$log" .log): $(tr '\r' '\n' <"$log" | grep -v '^\s*$' | tail -2)"; done
    ;;
collect)
    # what comes back: the run directories without their checkpoints (28 MB each), and the logs
    tar czf "${OUT:-/tmp}/pong_runs.tgz" --exclude=checkpoints $RUNS && ls -la "${OUT:-/tmp}"
    ;;
esac
