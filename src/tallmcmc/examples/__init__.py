"""Models used by the papers' experiments, ready to sample."""
