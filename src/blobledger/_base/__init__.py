"""The floor every layer may use: small helpers that import nothing of ours but the errors,
the settings and telemetry. Private."""
