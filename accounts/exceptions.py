"""Domain errors of accounts (core.exceptions.VouchError: a stable code and an HTTP status)."""

from core.exceptions import VouchError


class EmailUnverified(VouchError):
    """Money moves only for a user who confirmed their e-mail address. Never stored under an
    Idempotency-Key (nothing ran): the same key works once the address is confirmed."""

    code = "email_unverified"
    status_code = 403
    default_message = (
        "Confirm your e-mail address before moving money: follow the link in the message sent "
        "to you when you signed up (or send it again from /accounts/email/)."
    )
