"""Training over several processes: DDP's ranks and collectives, and FSDP sharding."""
