"""The run directory's schema and its safe writers and readers. ``train`` writes through it and ``analysis`` and
``sweep`` read through it, so neither reader imports ``train``."""
