#!/usr/bin/env bash
# Put the metrics.csv files packed by pack_metrics.sh back beside each run's summary.json (the archive stays).
#   bash docs/results/scripts/unpack_metrics.sh DIR    # e.g. causal/d1/cartpole; then per plot or a grid resume
set -euo pipefail
tar xJf "docs/results/$1/metrics.tar.xz" -C "docs/results/$1"
echo "docs/results/$1: $(find "docs/results/$1/runs" -name metrics.csv | wc -l) metrics.csv files"
