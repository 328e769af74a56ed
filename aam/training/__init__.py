"""Pretraining and fine-tuning: the run (``run``), its loop (``trainer``), step, objective and
losses, at the top; by job, ``data`` (what the loop reads), ``parallel`` (DDP, FSDP),
``checkpointing`` (surviving a job's end) and ``meters`` (what a run measures)."""
