"""What a run measures besides its losses: GPU busy, TFLOP/s and MFU, memory, and the
TensorBoard event log of each epoch."""
