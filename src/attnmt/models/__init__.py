"""Attention mechanisms and the model families behind one registry."""
