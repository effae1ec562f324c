"""The command line:

    python -m stripe_sandbox --host 127.0.0.1 --port 12111 \\
        [--webhook-url URL --webhook-secret whsec_...] [--state-file PATH] \\
        [--rate-limits stripe|off] [--live-keys] [--reference-delay-ms MS]
"""

from __future__ import annotations

import argparse
import signal
import sys
from types import FrameType

from stripe_sandbox.objects.payments import REFERENCE_DELAY_MS
from stripe_sandbox.persistence import StateFileError
from stripe_sandbox.server import SandboxServer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m stripe_sandbox",
        description=(
            "A stateful, Stripe-compatible HTTP server for tests and demos "
            "(accepts any sk_test_ key)."
        ),
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=12111)
    parser.add_argument("--webhook-url", help="deliver every event here, signed")
    parser.add_argument("--webhook-secret", help="the endpoint's signing secret (whsec_...)")
    parser.add_argument(
        "--seed", type=int, help="seed for fault probabilities and duplicate deliveries"
    )
    parser.add_argument(
        "--state-file",
        help="keep the state in this file across restarts: loaded at start if it exists, saved "
        "soon after each change and at exit (delete it to start afresh)",
    )
    parser.add_argument(
        "--rate-limits",
        choices=["stripe", "off"],
        default="stripe",
        help="stripe (the default): enforce Stripe's documented rate limits, answering 429 past "
        "them; off: never refuse for volume (POST /_sandbox/rate-limits changes them later)",
    )
    parser.add_argument(
        "--live-keys",
        action="store_true",
        help="also accept sk_live_/rk_live_ keys, limited at Stripe's live-mode figures",
    )
    parser.add_argument(
        "--reference-delay-ms",
        type=int,
        default=REFERENCE_DELAY_MS,
        help="how long after a card refund succeeds its acquirer reference number (ARN) appears "
        f"in destination_details.card (default {REFERENCE_DELAY_MS}; 0: at once; "
        "POST /_sandbox/reference-delay changes it later)",
    )
    parser.add_argument("--verbose", action="store_true", help="log every request")
    args = parser.parse_args(argv)
    if args.reference_delay_ms < 0:
        parser.error("--reference-delay-ms must be 0 or more")
    if bool(args.webhook_url) != bool(args.webhook_secret):
        parser.error("--webhook-url and --webhook-secret go together")
    try:
        server = SandboxServer(
            args.host,
            args.port,
            webhook_url=args.webhook_url,
            webhook_secret=args.webhook_secret,
            verbose=args.verbose,
            seed=args.seed,
            state_file=args.state_file,
            rate_limits=args.rate_limits == "stripe",
            live_keys=args.live_keys,
        )
    except StateFileError as exc:
        print(f"stripe_sandbox: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"stripe_sandbox: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 1

    server.sandbox.state.reference_delay_default_ms = args.reference_delay_ms
    server.sandbox.state.world.reference_delay_ms = args.reference_delay_ms

    def stop(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    print(f"Stripe sandbox listening on {server.url}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.httpd.server_close()
        server.sandbox.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
