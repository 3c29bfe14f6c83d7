"""The training loop over a cohort of S >= 1 seeds: the Trainer's phases, the lockstep order, the cohort's batched
steps, counters, schedules' positions, periodic tasks, stopping, evaluation and what each episode reports."""
