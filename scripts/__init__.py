"""User-facing helper scripts (``python scripts/<name>.py``); a package so tests and
benchmarks/ import them normally."""
