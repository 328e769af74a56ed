"""What the training loop reads: the study (table, tree or UniFrac matrix, metadata, split), its
batches with their UniFrac, made ahead in a thread, and the target's scale."""
