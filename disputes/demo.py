"""`manage.py demo_ce3`: a Visa Compelling Evidence 3.0 "qualified" packet to look at under
`make run`, made against the Stripe sandbox only, with no clock moved (issue 41 item 7).

CE 3.0 (disputes/ce3.py) needs two earlier undisputed payments on the disputed card, 120 to 365
days before it, sharing the buyer's account and IP address or device, each proven by a signed
charge receipt. A fresh `make run` has none, and moving the sandbox's clock 200 days cannot be
undone. So the earlier payments are made in the past, consistently on both sides:

1. **At the sandbox** (its control API, `POST /_sandbox/seed`): a succeeded charge on the buyer's
   demo card (`pm_card_visa`, so the same card fingerprint as the buyer's own fundings), created
   200 days before the sandbox clock's now, carrying the metadata Vouch's funding would have sent
   (`vouch_envelope`, `vouch_funding`, the buyer's account, IP address and device) and
   `vouch_demo`, which says what it is.
2. **In Vouch**, through its own services: the envelope and its funding leg are reserved first
   (`envelope_reserve`, nothing sent), so the seeded charge can name them; then the leg is
   recorded from what the provider holds (`funding_leg_find`: the PaymentIntent found by the
   leg's metadata, checked against its amount), which starts the charge's verification run; the
   run is decided now (a readback of the charge) and its VERIFIED verdict writes the signed
   receipt. The receipt's `time` is the charge's `created` as read back from the sandbox, never a
   time made up here, and its body keeps `vouch_demo`; nothing in it claims to have been signed
   then (a receipt carries no signing time; its row's `created_at` is now).
3. A new envelope is funded now on the same card (`envelope_create`, a real call to the sandbox),
   its receipt written the same way, and a fraud dispute (Visa 10.4, card not present) is opened
   on its charge at the sandbox and recorded as its webhook would record it
   (`dispute_on_provider_event`): the first packet version is prepared from the receipts.

Safe to run again: what a run made is found by the buyer's demo device (`vouch_device`) and the
`vouch_demo` receipts, and a buyer whose demo dispute exists gets it shown, nothing made.

The sandbox's control API is reached over HTTP, as every production module must (no app imports
`stripe_sandbox`: docs/decisions/0008-import-floors.md)."""

from __future__ import annotations

import hashlib
import json
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.urls import reverse

from accounts.models import User
from core.exceptions import VouchError
from core.request_facts import FundingFacts
from disputes.ce3 import PROGRAM, QUALIFIED
from disputes.models import Dispute, Packet
from disputes.services import dispute_on_provider_event
from envelopes.models import MICRO_PER_CENT, FundingLeg, FundingStatus
from envelopes.services.funding import (
    CHARGE_CONTRACT,
    envelope_create,
    envelope_reserve,
    funding_leg_find,
    funding_metadata,
)
from receipts import keys
from receipts.models import Receipt, ReceiptKind
from verification.models import Trigger, Verdict, VerificationRun
from verification.services import run_attempt, run_claim_for_event

# The key `make run` (config/settings/local.py) and the test settings give the sandbox: no real
# Stripe account has it.
SANDBOX_API_KEY = "sk_test_vouch_sandbox"
DAYS_BACK = 200  # inside CE 3.0's 120 to 365 days
PRIORS = 2
CARD = "pm_card_visa"  # the buyer's demo card (README, docs/getting-started.md)
DEMO_KEY = "vouch_demo"
DEMO_NOTE = (
    f"an earlier payment seeded in the Stripe sandbox {DAYS_BACK} days back by manage.py "
    "demo_ce3; its time is the sandbox's"
)
WAIT_S = 30.0  # for a verification run the worker holds


class DemoRefused(VouchError):
    code = "demo_refused"
    status_code = 409


@dataclass
class DemoResult:
    buyer: User
    made: list[str] = field(default_factory=list)  # what this run made, in words
    already: bool = False
    dispute: Dispute | None = None
    packet: Packet | None = None

    @property
    def ce3_status(self) -> str:
        enhanced = self.packet.enhanced if self.packet is not None else {}
        return str((enhanced.get(PROGRAM) or {}).get("status") or "none")

    @property
    def admin_path(self) -> str:
        if self.packet is None:
            return ""
        return reverse("admin:disputes_packet_review", args=[self.packet.pk])


# --- the sandbox, over HTTP --------------------------------------------------------------------


def sandbox_check() -> None:
    """Refuse anything but the sandbox: a live key, a real test-mode key, Stripe's own address, or
    a sandbox whose control API does not answer."""
    key = str(settings.STRIPE_API_KEY)
    if key.startswith(("sk_live_", "rk_live_")):
        raise DemoRefused(
            "STRIPE_API_KEY is a live-mode key: this demo makes payments in the Stripe sandbox "
            "only, never with real money. Nothing was made."
        )
    host = urlsplit(str(settings.STRIPE_API_BASE)).hostname or ""
    if key != SANDBOX_API_KEY or host == "stripe.com" or host.endswith(".stripe.com"):
        raise DemoRefused(
            "Vouch is not configured for the Stripe sandbox (STRIPE_API_KEY is a real key, or "
            "STRIPE_API_BASE is Stripe's): the demo seeds payments in the past, which only the "
            "sandbox's control API can do. Unset STRIPE_API_KEY and STRIPE_API_BASE, as "
            "`make run` has them. Nothing was made."
        )
    control("GET", "clock")


def control(method: str, path: str, body: dict[str, Any] | None = None) -> Any:
    """One call to the sandbox's control API (stripe_sandbox/README.md, *Control API*)."""
    url = f"{str(settings.STRIPE_API_BASE).rstrip('/')}/_sandbox/{path}"
    request = urllib.request.Request(  # noqa: S310 - the configured sandbox's address
        url,
        data=json.dumps(body or {}).encode() if method != "GET" else None,
        method=method,
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310 - ditto
            return json.loads(response.read())
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode(errors="replace")[:500]
        raise DemoRefused(
            f"The sandbox's control API refused {method} /_sandbox/{path}: {exc.code} {detail}"
        ) from exc
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise DemoRefused(
            f"The Stripe sandbox's control API at {url} does not answer ({exc}). Start "
            "`make run` (it starts the sandbox), or point STRIPE_API_BASE at a running sandbox."
        ) from exc


# --- Vouch's side ------------------------------------------------------------------------------


def demo_device(buyer: User) -> str:
    """The demo's device id for this buyer (32 hex digits, the shape of a real one): it marks
    the demo's envelopes, so a second run finds them."""
    return hashlib.sha256(f"vouch-demo-ce3:{buyer.pk}".encode()).hexdigest()[:32]


def _receipt_signed_and_trusted() -> None:
    key = keys.signing_key()
    if key.key_id not in keys.trusted_keys():
        raise DemoRefused(
            f"Receipts signed here would not be trusted (key {key.key_id!r} is not in "
            "RECEIPT_TRUSTED_KEYS), and CE 3.0 reads trusted receipts only. Run the command "
            "beside `make run`, from the repository's root: `make run` writes its receipt key to "
            "var/local-settings.json, which manage.py reads. Nothing was made."
        )


def _receipt_now(leg: FundingLeg) -> Receipt:
    """Decide the leg's charge run now (a readback at the sandbox) and return the charge's signed
    receipt, which its VERIFIED verdict writes. A run the worker holds is waited for."""
    run = VerificationRun.objects.get(contract_id=CHARGE_CONTRACT, operation_id=leg.idempotency_key)
    deadline = time.monotonic() + WAIT_S
    while run.verdict == Verdict.PENDING:
        token = run_claim_for_event(run_id=run.pk)
        if token is not None:
            run_attempt(run_id=run.pk, token=token, trigger=Trigger.EVENT)
        elif time.monotonic() > deadline:
            raise DemoRefused(f"The charge {leg.charge_id}'s verification run is still pending.")
        else:
            time.sleep(0.5)
        run.refresh_from_db()
    receipt = Receipt.objects.filter(
        kind=ReceiptKind.CHARGE, provider_object_id=leg.charge_id
    ).first()
    if run.verdict != Verdict.VERIFIED or receipt is None:
        raise DemoRefused(
            f"The charge {leg.charge_id} was not proven ({run.verdict}: {run.verdict_reason}); "
            "no receipt. See the verification run in the admin."
        )
    return receipt


def _prior_seed(buyer: User, facts: FundingFacts, amount_micro: int, now: int) -> str:
    """One earlier payment: reserved in Vouch, seeded at the sandbox DAYS_BACK days before its
    clock's now, recorded from what the sandbox holds, proven, and its receipt written."""
    leg = envelope_reserve(owner=buyer, amount_micro=amount_micro, payment_method=CARD, facts=facts)
    seeded = control(
        "POST",
        "seed",
        {
            "charges": [
                {
                    "amount": amount_micro // MICRO_PER_CENT,
                    "currency": "usd",
                    "payment_method": CARD,
                    "created": now - DAYS_BACK * 86_400,
                    "metadata": {**funding_metadata(leg), DEMO_KEY: DEMO_NOTE},
                }
            ]
        },
    )["charges"][0]
    leg = funding_leg_find(leg=leg).leg  # the PaymentIntent, by the leg's metadata
    if leg.status != FundingStatus.SUCCEEDED or leg.charge_id != seeded["id"]:
        raise DemoRefused(
            f"The seeded charge {seeded['id']} was not recorded as funding leg {leg.public_id}."
        )
    receipt = _receipt_now(leg)
    return (
        f"earlier payment: envelope {leg.envelope.public_id}, charge {leg.charge_id}, "
        f"paid {receipt.body['time']} (the sandbox's time), receipt {receipt.id}"
    )


def _demo_legs(buyer: User, device: str) -> list[FundingLeg]:
    return list(
        FundingLeg.objects.select_related("envelope")
        .filter(
            envelope__owner=buyer,
            status=FundingStatus.SUCCEEDED,
            provider_metadata__vouch_device=device,
        )
        .order_by("created_at", "id")
    )


def _seeded_charges(legs: list[FundingLeg]) -> set[str]:
    """The charges of these legs whose signed receipts say they were seeded by the demo."""
    return set(
        Receipt.objects.filter(
            kind=ReceiptKind.CHARGE,
            provider_object_id__in=[leg.charge_id for leg in legs],
            **{f"body__detail__metadata__{DEMO_KEY}": DEMO_NOTE},
        ).values_list("provider_object_id", flat=True)
    )


def demo_ce3(*, buyer: User, ip: str = "127.0.0.1", amount_micro: int = 20_000_000) -> DemoResult:
    """Make (or show, if made already) a fraud dispute whose packet qualifies for Visa CE 3.0,
    for this buyer, in the sandbox. DemoRefused, before anything is made, when Vouch does not
    talk to the sandbox or its receipts would not be trusted."""
    sandbox_check()
    _receipt_signed_and_trusted()
    result = DemoResult(buyer=buyer)
    device = demo_device(buyer)
    facts = FundingFacts(ip=ip, device=device)
    legs = _demo_legs(buyer, device)
    for leg in legs:  # a run that stopped before a receipt: written now, so it is told apart
        _receipt_now(leg)
    seeded = _seeded_charges(legs)
    disputes = Dispute.objects.filter(
        charge_id__in=[leg.charge_id for leg in legs if leg.charge_id not in seeded]
    ).order_by("-id")
    existing = disputes.first()
    if existing is not None:
        result.already = True
        result.dispute = existing
        result.packet = existing.packets.order_by("-version").first()
        return result
    now = int(control("GET", "clock")["now"])
    for _ in range(PRIORS - len(seeded)):
        result.made.append(_prior_seed(buyer, facts, amount_micro, now))
    recent = [leg for leg in legs if leg.charge_id not in seeded]
    if recent:  # an earlier run funded it, then stopped before the dispute
        leg = recent[-1]
    else:
        leg = envelope_create(
            owner=buyer, amount_micro=amount_micro, payment_method=CARD, facts=facts
        ).leg
        if leg.status != FundingStatus.SUCCEEDED:
            raise DemoRefused(f"The new funding {leg.public_id} is {leg.status}, not succeeded.")
    receipt = _receipt_now(leg)
    result.made.append(
        f"disputed payment: envelope {leg.envelope.public_id}, charge {leg.charge_id}, paid "
        f"{receipt.body['time']}, receipt {receipt.id}"
    )
    opened = control(
        "POST",
        "disputes",
        {"charge": leg.charge_id, "reason": "fraudulent", "network_reason_code": "10.4"},
    )
    # As the webhook records it (the delivery that follows finds it recorded).
    dispute_on_provider_event(
        event={"type": "charge.dispute.created", "data": {"object": {"id": opened["id"]}}}
    )
    result.dispute = Dispute.objects.get(provider_dispute_id=opened["id"])
    result.packet = result.dispute.packets.order_by("-version").first()
    result.made.append(
        f"dispute {result.dispute.public_id} ({opened['id']}): fraudulent, Visa 10.4, card not "
        "present"
    )
    return result


def demo_lines(result: DemoResult, base_url: str) -> list[str]:
    """What the command prints."""
    lines = [f"Buyer {result.buyer.get_username()} ({result.buyer.email})."]
    if result.already:
        lines.append("The demo was made already for this buyer; nothing new was made.")
    lines += [f"  made {line}" for line in result.made]
    if result.dispute is not None:
        lines.append(
            f"Dispute {result.dispute.public_id} on charge {result.dispute.charge_id} "
            f"({result.dispute.reason}, network reason {result.dispute.network_reason_code})."
        )
    if result.packet is not None:
        qualified = result.ce3_status == QUALIFIED
        lines.append(
            f"Packet {result.packet.public_id} (version {result.packet.version}): Visa CE 3.0 "
            f"{'qualified' if qualified else 'not qualified'} (status {result.ce3_status})."
        )
        lines.append(f"Review it: {base_url.rstrip('/')}{result.admin_path}")
    return lines
