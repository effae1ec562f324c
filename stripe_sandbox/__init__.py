"""A stateful, Stripe-compatible HTTP server for Vouch's tests, benchmarks and demos.

Plain Python with no Django import, in memory. It speaks Stripe's wire format to the official
SDK and covers what Vouch uses: PaymentIntents and charges, refunds, disputes, files and events,
with Stripe's idempotency, errors and signed webhooks, plus a control API (`/_sandbox/...`) for
faults, clock and state. See README.md beside this file."""

from stripe_sandbox.server import Sandbox, SandboxServer

__all__ = ["Sandbox", "SandboxServer"]
