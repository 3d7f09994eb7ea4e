"""Rank 5: the fixed evaluation protocol."""
