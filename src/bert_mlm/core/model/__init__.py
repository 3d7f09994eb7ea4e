"""Rank 4: the model, masking, the optimiser, checkpoints and data parallelism."""
