"""The training loop over a cohort of S >= 1 seeds: a member's data, built from a config and run (``trainer``), the
lockstep order, the cohort's batched steps, counters, schedules' positions, periodic tasks, stopping, evaluation
and what each episode reports."""
