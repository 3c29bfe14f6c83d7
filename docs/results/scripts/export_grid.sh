#!/usr/bin/env bash
# Put one env of a grid into docs/results: its figures and tables (per plot), and each run's small files.
#
#   bash docs/results/scripts/export_grid.sh GRID ENV DEST [--with-metrics]
#
# per plot runs/GRID --env ENV --out docs/results/DEST/ENV --metric replay/correlation_count, then each run's
# summary.json and config.yaml into docs/results/DEST/ENV/runs/<run>/. With --with-metrics also the grid's
# grid.yaml and every run's metrics.csv, packed into docs/results/DEST/ENV/metrics.tar.xz (xz makes them ~3x
# smaller; the repository travels to a lent GPU machine only under 64 MiB). `bash
# docs/results/scripts/unpack_metrics.sh DEST/ENV` puts them back beside each summary: then `per plot` redraws
# every figure from docs/results alone, and a grid whose runs must outlive the machine resumes from them (copied
# back into runs/GRID/, the grid skips them as completed and runs the rest).
set -euo pipefail
grid=$1 env=$2 dest=$3 with_metrics=${4:-}
out=docs/results/$dest/$env
per plot "runs/$grid" --env "$env" --out "$out" --metric replay/correlation_count
for run in runs/"$grid"/"$env"__*/; do  # this env's runs only (a grid of several envs holds them all)
  name=$(basename "$run")
  [ -f "$run/summary.json" ] && grep -q '"status": "completed"' "$run/summary.json" || continue
  mkdir -p "$out/runs/$name"
  cp "$run/summary.json" "$run/config.yaml" "$out/runs/$name/"
  if [ "$with_metrics" = --with-metrics ]; then cp "$run/metrics.csv" "$out/runs/$name/"; fi
done
if [ "$with_metrics" = --with-metrics ]; then
  cp "runs/$grid/grid.yaml" "$out/runs/grid.yaml"
  bash "$(dirname "$0")/pack_metrics.sh" "$dest/$env"
fi
echo "$(ls -d "$out"/runs/*/ | wc -l) runs in $out/runs"
