"""The run directory's schema and its safe writers and readers: file names, the summary's status vocabulary and
keys, metrics.csv's columns, TensorBoard event files, the claim on a directory. ``train`` writes through it and
``analysis`` and ``sweep`` read through it, so neither reader imports ``train``. It imports nothing from the
package but ``errors``."""
