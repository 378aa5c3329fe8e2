"""What the entry points train.py, evaluate.py and translate.py run."""
