"""`{{ leg|bank_reference }}`: a refund leg's reference at the card network as the buyer's page
shows it (envelopes.selectors.refund_references: the same words as the API and MCP)."""

from __future__ import annotations

from typing import Any

from django import template

from envelopes.models import RefundLeg
from envelopes.selectors.refund_references import refund_reference_data

register = template.Library()


@register.filter
def bank_reference(leg: RefundLeg) -> dict[str, Any] | None:
    return refund_reference_data(leg)
