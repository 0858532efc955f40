"""The protocol: the records, names of states, the clock, the transitions and the ledger's steps."""
