"""Mutation testing of the fences (``scripts/mutate``): each guard weakened on its own, in a
temporary copy of ``src/``, and a small, fail-fast test selection run against the copy."""
