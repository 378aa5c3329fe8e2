"""The train.log lines that scripts read back, as patterns.

The trainer writes them (meter.py: ``step N | ...``; loop.py: ``valid step N | ... | BLEU b |
chrF c``; evaluation.py: ``test (label, beam k): BLEU|signature = b``) through Hydra's file
format ``[YYYY-mm-dd HH:MM:SS,ms][name][LEVEL] - message``. ``scripts/compare_runs.py`` and
``scripts/snapshot_best.py`` parse logs with these, so a change of wording breaks one place.
"""

from __future__ import annotations

import re

STAMP = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),\d+\]")  # group 1: the time
STEP = re.compile(r"\] - step (\d+) \|")  # a training update's line
VALID = re.compile(r"valid step (\d+) \|.*\| BLEU ([\d.]+) \| chrF ([\d.]+)")
TEST = re.compile(r"test \(.*?, beam (\d+)\): (\w+)\|(\S+) = ([\d.]+)")  # beam, metric, sig, value
