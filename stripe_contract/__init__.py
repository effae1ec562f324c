"""Stripe's contract at the pinned API version, derived mechanically from the installed `stripe`
SDK (SPEC §12.1; docs/decisions/0013-the-sdk-types-are-the-contract.md): the operations its
service modules call, the `*Params` TypedDict each takes, the resource classes of what it answers.
It reads the SDK's generated types and never calls Stripe; an SDK bump re-derives everything.

- `operation_for(method, path)`: the SDK operation a request goes to, or None.
- `check_params(operation, data)`: a decoded form body against the operation's Params type.
- `check_object(obj, expanded=None, skip_ids=(), seen=None)`: a JSON object against its class
  and Stripe's fixture; `check_error(body)` an error answer against ErrorObject.
- `example(object_name)`: the smallest object of a resource the checker accepts (for tests).
- `RECORDER`: what a run showed (requests, objects, behaviours), for the conformance report.
"""

from stripe_contract.examples import example
from stripe_contract.known import INCLUDABLE, KNOWN_GAPS, REMOVED_PARAMS
from stripe_contract.objects import ResourceSeen, check_error, check_object, declared_fields
from stripe_contract.operations import Operation, operation_for, operations
from stripe_contract.params import check_params
from stripe_contract.recorder import LOG_ENV, RECORDER, Recorder
from stripe_contract.violations import Violation

__all__ = [
    "INCLUDABLE",
    "KNOWN_GAPS",
    "LOG_ENV",
    "RECORDER",
    "REMOVED_PARAMS",
    "Operation",
    "Recorder",
    "ResourceSeen",
    "Violation",
    "check_error",
    "check_object",
    "check_params",
    "declared_fields",
    "example",
    "operation_for",
    "operations",
]
