"""Corpus recipes: each turns raw material into (source, target) pairs per split.

The registry that names them is ``attnmt.data.corpora.RECIPES``.
"""
