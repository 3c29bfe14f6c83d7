#!/usr/bin/env bash
# Pack every runs/*/metrics.csv under docs/results/DIR into docs/results/DIR/metrics.tar.xz and remove them, so the
# tracked tree stays small (a lent GPU machine takes the repository only under 64 MiB); unpack_metrics.sh undoes it.
#   bash docs/results/scripts/pack_metrics.sh DIR      # e.g. causal/d1/cartpole
set -euo pipefail
dir=docs/results/$1
(cd "$dir" && find runs -name metrics.csv | sort >.metrics-list && \
  XZ_OPT=-9 tar cJf metrics.tar.xz -T .metrics-list && xargs rm <.metrics-list && rm .metrics-list)
echo "$dir/metrics.tar.xz: $(tar tJf "$dir/metrics.tar.xz" | wc -l) metrics.csv files, $(du -h "$dir/metrics.tar.xz" | cut -f1)"
