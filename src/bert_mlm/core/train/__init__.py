"""Rank 6: the training loop, assembling an experiment, the run plan."""
