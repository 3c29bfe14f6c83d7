#!/usr/bin/env bash
# Design 4 of the causal study (MinAtar Breakout and Freeway: prioritized, and uniform with n = 3) beside the
# committed uniform and none runs of docs/results/minatar/, redrawn from what is committed:
#
#   bash docs/results/scripts/design4_plot.sh            # -> docs/results/causal/d4/ (summary.md, figures, ...)
#
# per plot searches one directory, so the runs of both places are copied into a scratch one first (the minatar/
# runs are summaries and configs only: their curves are in minatar/; their final return, summary.json's last 20
# episodes, enters the tables). Design 4's metrics.csv files are unpacked from causal/d4/<env>/metrics.tar.xz
# where packed. The final return is summary.json's (the last 20 training episodes) for every run.
set -euo pipefail
results=docs/results
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
for env_dir in "$results"/causal/d4/*/; do
  [ -f "$env_dir/metrics.tar.xz" ] && tar xJf "$env_dir/metrics.tar.xz" -C "$scratch"  # (runs/<run>/metrics.csv)
  for run in "$env_dir"/runs/*/; do
    mkdir -p "$scratch/runs/$(basename "$run")"
    cp "$run"/* "$scratch/runs/$(basename "$run")/"
  done
done
for run in "$results"/minatar/runs/*/; do  # (named as design 4's uniform runs: kept apart by a suffix)
  mkdir -p "$scratch/runs/$(basename "$run")-minatar"
  cp "$run"/* "$scratch/runs/$(basename "$run")-minatar/"
done
per plot "$scratch/runs" --out "$results/causal/d4" --metric replay/correlation_count
# the tables name the command that remakes them: this script, not per plot of its scratch folder
sed -i -e "s|by \`per plot $scratch/runs [^\`]*\`|by \`bash docs/results/scripts/design4_plot.sh\` (per plot of a scratch folder of the runs)|" \
  -e "s|^# Results: $scratch/runs|# Results: causal/d4 beside minatar/|" "$results"/causal/d4/*.md
