"""The naive peer of bench/refund_api.py --against naive: the refund view a Django team would
write without Vouch's guarantees (no ledger, no idempotency, no verification run)."""
