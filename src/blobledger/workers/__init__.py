"""The workers: the sweeper (the deletion path), the reconciler, the checks, the doctor and
the lifecycle policies."""
