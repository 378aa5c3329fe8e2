"""attnmt's measurements: speed, start-up, the README's results tables, peer comparisons.

Run from the repository root as ``python -m benchmarks.<module>``; see benchmarks/README.md.
"""
