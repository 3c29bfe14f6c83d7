"""per: a command-line experiment runner for studying experience replay in deep Q-learning."""

import os

# Each run is single-threaded by design (`per grid` runs one process per core): OpenBLAS's threads would spin on the
# metrics' small matrix products. Set before numpy is imported; a value the user exported wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

# numba's on-disk cache misses changes in a kernel's callees from other modules: key it by the compiled code's
# source (per_cli/compiled_cache.py). Before any module of the package decorates a kernel.
from per_cli.compiled_cache import point_numba_cache  # noqa: E402

point_numba_cache()

__version__ = "0.1.0"
