"""A dispute's enhanced evidence (Stripe API 2026-10-28.endive): Visa Compelling Evidence 3.0
(`evidence[enhanced_evidence][visa_compelling_evidence_3]`), Visa compliance and Mastercard
compliance (`evidence[enhanced_evidence][visa_compliance|mastercard_compliance]
[fee_acknowledged]`; https://docs.stripe.com/disputes/api/visa-compliance,
https://docs.stripe.com/changelog/dahlia/2026-06-24/mastercard-compliance-disputes). Parsing
refuses what Stripe refuses; the qualification Stripe reports in
`evidence_details.enhanced_eligibility` is computed from the transactions given, one small pure
function per rule."""

from __future__ import annotations

import copy
from typing import Any

from stripe_sandbox import objects
from stripe_sandbox.errors import StripeError, invalid, resource_missing
from stripe_sandbox.objects import CE3, MASTERCARD_COMPLIANCE, VISA_COMPLIANCE

ENHANCED_PARAM = "evidence[enhanced_evidence]"
CE3_PARAM = f"{ENHANCED_PARAM}[{CE3}]"
# The network compliance programs, each contested only with its network fee acknowledged.
COMPLIANCE = (MASTERCARD_COMPLIANCE, VISA_COMPLIANCE)
PROGRAMS = (CE3, *COMPLIANCE)


def program_param(program: str) -> str:
    return f"{ENHANCED_PARAM}[{program}]"


def fee_param(program: str) -> str:
    return f"{program_param(program)}[fee_acknowledged]"


ADDRESS_FIELDS = ("city", "country", "line1", "line2", "postal_code", "state")
_IDENTITY_FIELDS = (
    "customer_account_id",
    "customer_device_fingerprint",
    "customer_device_id",
    "customer_email_address",
    "customer_purchase_ip",
    "product_description",
)
DISPUTED_FIELDS = (*_IDENTITY_FIELDS, "merchandise_or_services", "shipping_address")
PRIOR_FIELDS = ("charge", *_IDENTITY_FIELDS, "shipping_address")
MERCHANDISE_OR_SERVICES = frozenset({"merchandise", "services"})
MAX_PRIORS = 2
TEXT_MAX = 5_000
DESCRIPTION_MAX = 20_000  # product_description, as Stripe's other long evidence text
AGE_MIN_DAYS, AGE_MAX_DAYS = 120, 365
DAY_S = 24 * 60 * 60

# The data elements Visa compares between the disputed transaction and each prior one; a prior
# must share two, one of them the IP address or the device.
ELEMENTS = ("customer_account_id", "customer_purchase_ip", "device", "shipping_address")
STRONG_ELEMENTS = frozenset({"customer_purchase_ip", "device"})


# --- parsing ----------------------------------------------------------------------------------


def _hash(value: Any, param: str) -> dict[str, Any] | None:
    """A nested hash; the empty string unsets it (None)."""
    if value == "":
        return None
    if not isinstance(value, dict):
        raise invalid(f"Invalid {param}: must be a hash", param=param)
    return value


def _text(value: Any, param: str, limit: int = TEXT_MAX) -> str | None:
    if not isinstance(value, str):
        raise invalid(f"Invalid string: {param}", param=param, code="parameter_invalid_string")
    if len(value) > limit:
        raise invalid(f"Invalid {param}: must be at most {limit} characters", param=param)
    return value or None


def _address(value: Any, param: str) -> dict[str, str | None] | None:
    address = _hash(value, param)
    if address is None:
        return None
    parsed = {name: _text(address.get(name, ""), f"{param}[{name}]") for name in ADDRESS_FIELDS}
    return parsed if any(parsed.values()) else None


def _transaction(value: Any, param: str, fields: tuple[str, ...]) -> dict[str, Any] | None:
    """One transaction's hash, every field present (None when not given)."""
    given = _hash(value, param)
    if given is None:
        return None
    parsed: dict[str, Any] = {}
    for name in fields:
        raw = given.get(name, "")
        at = f"{param}[{name}]"
        if name == "shipping_address":
            parsed[name] = _address(raw, at)
        elif name == "product_description":
            parsed[name] = _text(raw, at, DESCRIPTION_MAX)
        else:
            parsed[name] = _text(raw, at)
    kind = parsed.get("merchandise_or_services")
    if kind is not None and kind not in MERCHANDISE_OR_SERVICES:
        raise invalid(
            f"Invalid {param}[merchandise_or_services]: must be one of merchandise, services",
            param=f"{param}[merchandise_or_services]",
            code="parameter_invalid_string",
        )
    return parsed


def _priors(
    value: Any, *, disputed_charge: dict[str, Any], charges: dict[str, dict[str, Any]]
) -> list[dict[str, Any]]:
    param = f"{CE3_PARAM}[prior_undisputed_transactions]"
    if not isinstance(value, list):
        raise invalid(f"Invalid {param}: must be an array of hashes", param=param)
    if len(value) > MAX_PRIORS:
        raise invalid(
            f"Invalid {param}: at most {MAX_PRIORS} prior undisputed transactions may be given "
            f"(a third prior transaction was given)",
            param=param,
        )
    priors: list[dict[str, Any]] = []
    for index, item in enumerate(value):
        at = f"{param}[{index}]"
        prior = _transaction(item, at, PRIOR_FIELDS)
        if prior is None:
            raise invalid(f"Invalid {at}: must be a hash", param=at)
        charge_id = prior["charge"]
        if charge_id is None:
            raise invalid(
                f"Missing required param: {at}[charge].",
                param=f"{at}[charge]",
                code="parameter_missing",
            )
        if charge_id not in charges:
            raise resource_missing("charge", charge_id, param=f"{at}[charge]")
        if charge_id == disputed_charge["id"]:
            raise invalid(
                f"A prior undisputed transaction cannot be the disputed charge itself "
                f"({charge_id}).",
                param=f"{at}[charge]",
            )
        if any(charge_id == other["charge"] for other in priors):
            raise invalid(
                f"The same prior transaction ({charge_id}) was given twice.",
                param=f"{at}[charge]",
            )
        priors.append(prior)
    return priors


def _boolean(value: Any, param: str) -> bool:
    if value not in ("true", "false"):
        raise invalid(f"Invalid boolean: {value}", param=param)
    return bool(value == "true")


def enhanced_evidence_parse(
    value: Any,
    *,
    dispute: dict[str, Any],
    disputed_charge: dict[str, Any],
    charges: dict[str, dict[str, Any]],
) -> dict[str, Any]:
    """`evidence[enhanced_evidence]` checked against the dispute's `enhanced_eligibility_types`:
    the dispute's whole `enhanced_evidence` as it would be after this update. Within Visa
    Compelling Evidence 3.0, `disputed_transaction` and `prior_undisputed_transactions` each
    replace what was staged when given; `visa_compliance[fee_acknowledged]` replaces too."""
    given = _hash(value, ENHANCED_PARAM)
    if given is None:  # `evidence[enhanced_evidence]=""`: unset (Literal[''] in the SDK's type)
        return {}
    staged = copy.deepcopy(dispute["evidence"]["enhanced_evidence"])
    eligible = dispute["enhanced_eligibility_types"]
    for program in PROGRAMS:
        if program in given and program not in eligible:
            raise invalid(
                f"This dispute is not eligible for {program} enhanced evidence (its "
                f"enhanced_eligibility_types are {eligible}).",
                param=program_param(program),
            )
    if CE3 in given:
        ce3 = _hash(given[CE3], CE3_PARAM) or {}
        current = staged.get(CE3) or {
            "disputed_transaction": None,
            "prior_undisputed_transactions": [],
        }
        if "disputed_transaction" in ce3:
            current["disputed_transaction"] = _transaction(
                ce3["disputed_transaction"], f"{CE3_PARAM}[disputed_transaction]", DISPUTED_FIELDS
            )
        if "prior_undisputed_transactions" in ce3:
            current["prior_undisputed_transactions"] = _priors(
                ce3["prior_undisputed_transactions"],
                disputed_charge=disputed_charge,
                charges=charges,
            )
        staged[CE3] = current
    for program in COMPLIANCE:
        if program in given:
            compliance = _hash(given[program], program_param(program)) or {}
            current = staged.get(program) or {"fee_acknowledged": False}
            if "fee_acknowledged" in compliance:
                current["fee_acknowledged"] = _boolean(
                    compliance["fee_acknowledged"], fee_param(program)
                )
            staged[program] = current
    return staged


# --- Visa Compelling Evidence 3.0: the rules ---------------------------------------------------


def age_days(disputed_created: int, prior_created: int) -> int:
    """Whole days from the prior charge to the disputed one."""
    return (disputed_created - prior_created) // DAY_S


def in_age_window(days: int) -> bool:
    return AGE_MIN_DAYS <= days <= AGE_MAX_DAYS


def same_card(disputed_charge: dict[str, Any], prior_charge: dict[str, Any]) -> bool:
    first = disputed_charge["payment_method_details"]["card"].get("fingerprint")
    second = prior_charge["payment_method_details"]["card"].get("fingerprint")
    return first is not None and first == second


def _norm(value: str | None) -> str:
    return (value or "").strip().casefold()


def carried_elements(transaction: dict[str, Any] | None) -> set[str]:
    """The data elements a transaction carries (device: its id or its fingerprint)."""
    if transaction is None:
        return set()
    carried = {
        name
        for name in ("customer_account_id", "customer_purchase_ip", "shipping_address")
        if transaction.get(name)
    }
    if transaction.get("customer_device_id") or transaction.get("customer_device_fingerprint"):
        carried.add("device")
    return carried


def _same(first: str | None, second: str | None) -> bool:
    return bool(_norm(first)) and _norm(first) == _norm(second)


def _same_address(first: dict[str, Any] | None, second: dict[str, Any] | None) -> bool:
    if not first or not second:
        return False
    return all(_norm(first.get(name)) == _norm(second.get(name)) for name in ADDRESS_FIELDS)


def matching_elements(disputed: dict[str, Any], prior: dict[str, Any]) -> set[str]:
    """The data elements the prior transaction shares with the disputed one."""
    matching = {
        name
        for name in ("customer_account_id", "customer_purchase_ip")
        if _same(disputed.get(name), prior.get(name))
    }
    if _same(disputed.get("customer_device_id"), prior.get("customer_device_id")) or _same(
        disputed.get("customer_device_fingerprint"), prior.get("customer_device_fingerprint")
    ):
        matching.add("device")
    if _same_address(disputed.get("shipping_address"), prior.get("shipping_address")):
        matching.add("shipping_address")
    return matching


def elements_suffice(elements: set[str]) -> bool:
    """Two data elements, at least one of them the IP address or the device."""
    return len(elements) >= 2 and bool(elements & STRONG_ELEMENTS)


def prior_qualifies(
    *,
    disputed_charge: dict[str, Any],
    disputed: dict[str, Any] | None,
    prior: dict[str, Any],
    prior_charge: dict[str, Any] | None,
) -> bool:
    """A prior transaction that could count: a succeeded, undisputed charge on the same card,
    120 to 365 whole days before the disputed one, and (when both transactions carry enough
    identifiers to compare) sharing enough data elements with it."""
    if prior_charge is None or prior_charge["status"] != "succeeded" or prior_charge["disputed"]:
        return False
    if not same_card(disputed_charge, prior_charge):
        return False
    if not in_age_window(age_days(disputed_charge["created"], prior_charge["created"])):
        return False
    comparable = disputed is not None and elements_suffice(carried_elements(disputed))
    if comparable and elements_suffice(carried_elements(prior)):
        return elements_suffice(matching_elements(disputed or {}, prior))
    return True


def ce3_required_actions(ce3: dict[str, Any]) -> list[str]:
    """What is missing before the evidence can qualify, in Stripe's vocabulary."""
    disputed = ce3.get("disputed_transaction")
    priors = ce3.get("prior_undisputed_transactions") or []
    actions = set()
    if not elements_suffice(carried_elements(disputed)) or any(
        not elements_suffice(carried_elements(prior)) for prior in priors
    ):
        actions.add("missing_customer_identifiers")
    if not disputed or not disputed.get("product_description"):
        actions.add("missing_disputed_transaction_description")
    if not disputed or not disputed.get("merchandise_or_services"):
        actions.add("missing_merchandise_or_services")
    if any(not prior.get("product_description") for prior in priors):
        actions.add("missing_prior_undisputed_transaction_description")
    if len(priors) < MAX_PRIORS:
        actions.add("missing_prior_undisputed_transactions")
    return sorted(actions)


def ce3_qualification(
    ce3: dict[str, Any], *, disputed_charge: dict[str, Any], charges: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    """`evidence_details.enhanced_eligibility.visa_compelling_evidence_3`: `not_qualified` when a
    prior given fails a rule (another card, disputed, outside 120-365 days, too few shared data
    elements), else `requires_action` while something is missing, else `qualified`."""
    disputed = ce3.get("disputed_transaction")
    for prior in ce3.get("prior_undisputed_transactions") or []:
        if not prior_qualifies(
            disputed_charge=disputed_charge,
            disputed=disputed,
            prior=prior,
            prior_charge=charges.get(prior["charge"]),
        ):
            return {"required_actions": [], "status": "not_qualified"}
    actions = ce3_required_actions(ce3)
    return {"required_actions": actions, "status": "requires_action" if actions else "qualified"}


# --- Visa and Mastercard compliance ------------------------------------------------------------


def compliance_status(compliance: dict[str, Any] | None) -> dict[str, str]:
    acknowledged = bool(compliance and compliance.get("fee_acknowledged"))
    return {"status": "fee_acknowledged" if acknowledged else "requires_fee_acknowledgement"}


def compliance_fee_unacknowledged(eligible: list[str], enhanced: dict[str, Any]) -> str | None:
    """A Visa or Mastercard compliance dispute cannot be contested until the network fee is
    acknowledged: the program whose acknowledgement is missing, or None."""
    for program in COMPLIANCE:
        staged = enhanced.get(program)
        if program in eligible and not (staged and staged.get("fee_acknowledged")):
            return program
    return None


def compliance_fee_refusal(program: str) -> StripeError:
    network = "Mastercard" if program == MASTERCARD_COMPLIANCE else "Visa"
    return invalid(
        f"Contesting this {network} compliance dispute incurs a USD 500 network fee, which must "
        f"be acknowledged first: set {fee_param(program)}=true.",
        param=fee_param(program),
    )


def enhanced_eligibility(
    dispute: dict[str, Any],
    enhanced: dict[str, Any],
    *,
    disputed_charge: dict[str, Any],
    charges: dict[str, dict[str, Any]],
) -> dict[str, Any]:
    """`evidence_details.enhanced_eligibility` for the staged enhanced evidence."""
    eligibility = objects.enhanced_eligibility(dispute["enhanced_eligibility_types"])
    if CE3 in enhanced:
        eligibility[CE3] = ce3_qualification(
            enhanced[CE3], disputed_charge=disputed_charge, charges=charges
        )
    for program in COMPLIANCE:
        if program in enhanced:
            eligibility[program] = compliance_status(enhanced[program])
    return eligibility
