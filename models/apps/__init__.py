"""Synthetic applications: each emits an operation table, its regions and the cause ledger."""
