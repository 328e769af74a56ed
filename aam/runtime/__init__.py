"""What every command's run stands on: atomic writes and output sets, one writer per run
directory, CPU threads, and inputs staged to node-local scratch."""
