"""The workers: the sweeper (the deletion path), the reconciler, the checks, the doctor, the
lifecycle policies and the storage experiments."""
