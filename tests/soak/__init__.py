"""The soak: ``python -m tests.soak --seconds 120`` (tests/soak/run.py says what it does)."""
