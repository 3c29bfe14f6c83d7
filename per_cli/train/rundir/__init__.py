"""The run directory's writers: metrics.csv, the atomic summary.json and its status vocabulary, TensorBoard event
files, and the progress line."""
