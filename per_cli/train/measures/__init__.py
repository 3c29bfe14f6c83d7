"""The per-update measures: TD-error statistics, the notebook's correlation count, the i.i.d. measures (state and
episode diversity), sample age, IS weights and the unweighted loss, kept per log window."""
