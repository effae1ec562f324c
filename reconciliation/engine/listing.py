"""The listing phases: the provider's refunds, charges and disputes created in the run's window,
a page at a time (read one ahead by a thread of its own), each page stored with its SHA-256 and
compared, and what it showed kept (`Seen`) with the checkpoint after it."""

from __future__ import annotations

import math
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

from django.db import connection, connections

from providers.stripe_provider import Page
from reconciliation.engine.charges import _charges
from reconciliation.engine.disputes import _disputes
from reconciliation.engine.refunds import _refunds
from reconciliation.engine.shared import (
    _carried,
    _committed_lazily,
    _Context,
    _observation,
    _Stored,
    _stored,
    _tick,
)
from reconciliation.models import Run, Seen
from reconciliation.runs import run_checkpoint

LISTED = ("refunds", "charges", "disputes")


def _list(ctx: _Context, kind: str, after: str | None) -> None:
    pages = ctx.provider.list_pages(
        kind,
        created_gte=math.floor(ctx.run.window_start.timestamp()),
        created_lt=math.ceil(ctx.run.window_end.timestamp()),
        starting_after=after,
        limit=100,
        budget=ctx.budget,
    )
    compare = {"refunds": _refunds, "charges": _charges, "disputes": _disputes}[kind]
    for page, stored in _read_ahead(pages):
        ctx.run.pages += 1
        ctx.run.provider_calls += page.attempts
        request = {"path": f"/v1/{kind}", "params": page.params}
        observation = _observation(ctx, kind, request, stored)
        seen = compare(ctx, page.data, observation)
        # The page, what it showed and the checkpoint after it, together (one commit a page).
        with _committed_lazily():
            if observation.pk is None:
                observation.save(force_insert=True)
            if seen:
                _seen(ctx.run, seen)
            run_checkpoint(ctx.run, phase=kind, after=page.last_id, **_carried(ctx))
        _tick(ctx)


def _seen(run: Run, object_ids: list[str]) -> None:
    """Record what a page showed (once per run: a page read again on resume adds nothing). On
    PostgreSQL one array parameter rather than two per row."""
    if connection.vendor != "postgresql":
        Seen.objects.bulk_create(
            [Seen(run=run, object_id=object_id) for object_id in object_ids],
            ignore_conflicts=True,
        )
        return
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {Seen._meta.db_table} (run_id, object_id) "
            "SELECT %s, unnest(%s::text[]) ON CONFLICT DO NOTHING",
            [run.pk, object_ids],
        )


def _read_ahead(pages: Iterator[Page]) -> Iterator[tuple[Page, _Stored]]:
    """The pages, each with its body hashed and compressed, read one ahead by a thread of its
    own: while a page is compared and stored, the next is on its way (the provider's time, the
    parsing, hashing and compressing overlap the comparison's SQL instead of adding to it). At
    most one page ahead, so two pages are held at a time; a page that cannot be read raises
    where it is asked for, as it would unthreaded. The list is lazy: it is advanced only in the
    thread, which draws on the call budget as before (its database connection, which the budget
    uses, is closed when the listing ends)."""

    def fetch() -> tuple[Page, _Stored] | None:
        page = next(pages, None)
        return None if page is None else (page, _stored(page.body))

    def finish() -> None:
        try:
            close = getattr(pages, "close", None)
            if close is not None:
                close()
        finally:
            connections.close_all()  # this thread's connections only

    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="reconciliation-read-ahead")
    try:
        ahead = pool.submit(fetch)
        while (fetched := ahead.result()) is not None:
            ahead = pool.submit(fetch)
            yield fetched
    finally:
        # After the page in flight, if any (one worker: in order); then the thread ends.
        pool.submit(finish).result()
        pool.shutdown(wait=True)
