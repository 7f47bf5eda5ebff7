"""Models used by the papers' experiments and by the tests of the automatic path, ready to sample."""
