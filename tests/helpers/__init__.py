"""Shared test helpers: tiny checkpoints, toy training configs, free ports."""
