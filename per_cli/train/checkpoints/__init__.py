"""Checkpoint files (written atomically, the latest kept), env snapshots, and what a resume may change."""
