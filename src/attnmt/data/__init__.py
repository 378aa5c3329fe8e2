"""Corpora, tokenization and batching."""
