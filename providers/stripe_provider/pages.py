"""Provider lists a page at a time: a page as the provider sent it, the cursors that go on to
the next one, and a whole list collected into one outcome."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import stripe

from providers.outcomes import Outcome, OutcomeKind, ProviderUnavailable

# What `list_pages` lists: Stripe's list endpoints that reconciliation compares.
LIST_KINDS = frozenset({"refunds", "charges", "disputes", "events"})


@dataclass(frozen=True)
class Page:
    """One page of a provider list, as the provider sent it."""

    kind: str  # refunds, charges, disputes, events
    params: dict[str, Any]  # the request's parameters, as sent
    data: list[dict[str, Any]]  # the objects, as the provider sent them
    has_more: bool
    body: bytes = field(repr=False)  # the response body exactly as received (to SHA-256 it)
    attempts: int  # calls this page took, retries included
    last_id: str | None  # the last object's id: the cursor of the next page


# One request to the provider, given the request options (the idempotency key).
_Request = Callable[[stripe.RequestOptions], Any]
# How a list goes on: the next page's parameters, or None after the last page.
_Advance = Callable[[dict[str, Any], dict[str, Any]], "dict[str, Any] | None"]


def _after_last(params: dict[str, Any], answer: dict[str, Any]) -> dict[str, Any] | None:
    """Stripe's list cursor: the page after the last object, while there is more."""
    if not answer.get("has_more") or not answer["data"]:
        return None
    return {**params, "starting_after": answer["data"][-1]["id"]}


def _next_search_page(params: dict[str, Any], answer: dict[str, Any]) -> dict[str, Any] | None:
    """The Search API's cursor: `next_page`, while there is more."""
    if not answer.get("has_more") or not answer.get("next_page"):
        return None
    return {**params, "page": answer["next_page"]}


def _collect(pages: Iterator[Page]) -> Outcome:
    """Every object of every page as one accepted outcome (`{"data": [...]}`, attempts summed);
    or, if a page cannot be read, that page's outcome (attempts summed)."""
    found: list[dict[str, Any]] = []
    attempts = 0
    try:
        for page in pages:
            attempts += page.attempts
            found.extend(page.data)
    except ProviderUnavailable as exc:
        return replace(exc.outcome, attempts=attempts + exc.outcome.attempts)
    return Outcome(OutcomeKind.ACCEPTED, {"data": found}, attempts=attempts)
