"""Training support: checkpoints, learning-rate schedules and preemption handling."""
