"""The floor every layer may use: the name rules, durations and sizes, asyncio helpers, the
log set-up and the metrics. Private: nothing here is part of the public API."""
