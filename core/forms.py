"""Form fields every Vouch form shares. Money is typed as people read it, in dollars (`2.00`,
`$2.00`, `2,50` with a decimal comma, or to the micro-dollar: `0.005433`; never a thousands
separator: `1,250.50` is refused as core.amounts refuses it), and cleaned to the integer
micro-dollars the services take (STYLE rule 5): exact, never through a float; what is not an
amount in dollars (`two`, `1e6`, `-1`, a fraction of a micro-dollar) is refused, never guessed."""

from __future__ import annotations

from typing import Any

from django import forms
from django.core.exceptions import ValidationError

from core.amounts import AmountUnreadable, dollars_read, micro_from_dollars


class DollarsField(forms.Field):
    """An amount in dollars, cleaned to integer micro-dollars."""

    default_error_messages = {
        "invalid": "Type an amount in dollars, e.g. 2.00 or $2.00.",
    }

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault(
            "widget", forms.TextInput(attrs={"inputmode": "decimal", "placeholder": "2.00"})
        )
        super().__init__(**kwargs)

    def to_python(self, value: Any) -> int | None:
        text = str(value).strip() if value is not None else ""
        if not text:
            return None
        try:
            dollars_read(text)
        except AmountUnreadable as unreadable:  # the one reader's words (`use a dot`)
            raise ValidationError(unreadable.message, code="invalid") from None
        micro = micro_from_dollars(text)  # at most 20 characters, exact, never negative
        if micro is None:  # finer than a micro-dollar
            raise ValidationError(self.error_messages["invalid"], code="invalid")
        return micro
