"""Benchmarks: every figure side by side with its baseline, in the same run, as a ratio."""
