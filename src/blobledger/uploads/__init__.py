"""The upload flows built on the ledger: resumable (tus) and direct-to-store uploads."""
