"""attnmt's experiments: studies (configs/study/), their one sweep driver, and the pages
generated from their run folders (results/<study>/<run>/)."""
