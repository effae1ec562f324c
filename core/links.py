"""Every id on a page links to its object (SPEC §10): a Vouch id (`env_…`, `rfl_…`, `dsc_…`, a
run's `vrun_…` or `rec_…`) to its admin page, a provider id (`ch_…`, `re_…`) to the Stripe
Dashboard (`core.dashboard`), anything else stays text.

`core` knows no app (the floors in pyproject's [tool.importlinter]), so it cannot know which model
an `env_` names: each app says so for its own objects (`register_id`, from its admin module, next
to the pages it registers), and the lookup goes through Django's app registry by the model's label.
An app above another may also say which of its objects concern a row of the lower one
(`register_referrer`): the escalation page (verification) shows its discrepancy (reconciliation)
and its envelope (envelopes) without verification importing either."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from django.apps import apps
from django.contrib.admin.utils import quote
from django.db import models
from django.urls import NoReverseMatch, reverse
from django.utils.html import escape, format_html
from django.utils.safestring import SafeString, mark_safe

from core.dashboard import stripe_dashboard_url, stripe_link

NOTHING = "—"

# An id inside text: a short lower-case prefix, an underscore, then letters and digits.
WHOLE_ID = re.compile(r"[a-z]{2,5}_[A-Za-z0-9]+")
ID_IN_TEXT = re.compile(r"(?<![\w/.#-])([a-z]{2,5}_[A-Za-z0-9]{3,})(?![\w/-])")


@dataclass(frozen=True)
class IdKind:
    model: str  # the model's label, e.g. "envelopes.Envelope"
    field: str  # the column that holds the id
    page: Callable[[Any], str] | None  # the object's page; its admin change page by default


_KINDS: dict[str, IdKind] = {}
_REFERRERS: dict[str, list[Callable[[Any], Iterable[tuple[str, str]]]]] = {}


def register_id(
    prefix: str,
    model: str,
    *,
    field: str = "public_id",
    page: Callable[[Any], str] | None = None,
) -> None:
    """Ids starting with `prefix` (`"env_"`) name rows of `model` (`"envelopes.Envelope"`) by
    `field`; `page` gives a found row's address when it has no admin page of its own (a leg: its
    row on its parent's page)."""
    _KINDS[prefix] = IdKind(model=model, field=field, page=page)


def register_referrer(model: str, find: Callable[[Any], Iterable[tuple[str, str]]]) -> None:
    """`find(row)` gives, for a row of `model`, the (label, id) of other objects that concern it."""
    _REFERRERS.setdefault(model, []).append(find)


def registered() -> dict[str, IdKind]:
    """Every prefix the apps registered, with what it names."""
    return dict(_KINDS)


def _kind_of(value: str) -> IdKind | None:
    head, underscore, _ = value.partition("_")
    return _KINDS.get(f"{head}_") if underscore else None


def admin_change_url(obj: models.Model) -> str:
    """The object's admin change page, or "" when its model has none."""
    opts = obj._meta
    try:
        return reverse(f"admin:{opts.app_label}_{opts.model_name}_change", args=[quote(obj.pk)])
    except NoReverseMatch:
        return ""


def object_url(value: str | None) -> str:
    """The page of the Vouch object `value` names, or "" (not a Vouch id, or no such object)."""
    kind = _kind_of(value or "")
    if kind is None:
        return ""
    model = apps.get_model(kind.model)
    obj = model._default_manager.filter(**{kind.field: value}).first()
    if obj is None:
        return ""
    return kind.page(obj) if kind.page is not None else admin_change_url(obj)


def id_link(value: str | None) -> SafeString | str:
    """The id as a link to its object: a Vouch object's page, or the provider's Dashboard; an id
    of nothing known as plain monospace text (never a dead link)."""
    if not value:
        return NOTHING
    url = object_url(value)
    if url:
        return format_html('<a class="vouch-mono vouch-id" href="{}">{}</a>', url, value)
    if stripe_dashboard_url(value):
        return stripe_link(value)
    return format_html('<span class="vouch-mono">{}</span>', value)


def link_ids(text: str | None) -> SafeString:
    """`text`, escaped, with every id in it that names something linked to it."""
    if not text:
        return mark_safe("")
    if WHOLE_ID.fullmatch(text):  # the text is one id, however short (`re_1`)
        return mark_safe(str(id_link(text)))  # noqa: S308 - built by format_html
    parts: list[str] = []
    last = 0
    for match in ID_IN_TEXT.finditer(text):
        value = match.group(1)
        if not (_kind_of(value) or stripe_dashboard_url(value)):
            continue
        parts.append(escape(text[last : match.start(1)]))
        parts.append(str(id_link(value)))
        last = match.end(1)
    parts.append(escape(text[last:]))
    return mark_safe("".join(parts))  # noqa: S308 - every piece is escaped or built by format_html


def referring_ids(obj: models.Model) -> list[tuple[str, str]]:
    """The (label, id) of the objects other apps say concern `obj`, each once, in their order."""
    found: list[tuple[str, str]] = []
    for find in _REFERRERS.get(obj._meta.label, []):
        for label, value in find(obj):
            if value and all(value != seen for _, seen in found):
                found.append((label, value))
    return found
