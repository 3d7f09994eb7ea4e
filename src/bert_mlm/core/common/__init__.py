"""Rank 1 of the core: helpers every stage may use (files, progress, redaction, device, text, statistics, seeds)."""
