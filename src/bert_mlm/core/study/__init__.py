"""Rank 8: the Optuna mask-rate study and its record."""
