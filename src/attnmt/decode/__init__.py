"""From a trained model to hypotheses and scores: search, the translator, metrics, plots."""
