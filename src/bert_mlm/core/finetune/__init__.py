"""Rank 7: fine-tuning evaluation (did pretraining help the user's task?)."""
