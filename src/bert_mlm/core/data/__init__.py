"""Rank 2: the corpus: sources, cleaning and the hash split, document shards, the parallel engine, reuse."""
