"""How a run survives its job's end: checkpoints and exact resume, the progress they hold, and
the signals (SLURM's, a gone Snakemake's) that save and stop it."""
