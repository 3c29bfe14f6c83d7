"""Checkpoint files (written atomically, the latest kept, read without running code), env snapshots, and what a
resume may change."""
