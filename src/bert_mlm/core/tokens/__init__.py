"""Rank 3: tokenizers, vocabularies, word boundaries, the token store, sequences and mixture draws."""
