"""Rank 9: the run record, results, provenance, the model card and the report."""
