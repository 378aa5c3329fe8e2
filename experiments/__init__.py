"""attnmt's experiments: the results ledger, its plan and runner, and the docs generated from it."""
