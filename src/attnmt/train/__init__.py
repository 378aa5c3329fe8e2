"""The training loop and what only training needs."""
