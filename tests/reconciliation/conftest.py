from tests.envelopes.conftest import alice, sdk, stripe_at_sandbox

__all__ = ["alice", "sdk", "stripe_at_sandbox"]
