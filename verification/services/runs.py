"""Starting a verification run: its correlation keys resolved, its first attempt and its
deadline scheduled, saved once per contract and operation."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import IntegrityError, connection, transaction

from core import db
from verification.contracts import get_contract
from verification.expressions import Context, missing
from verification.models import (
    RunKey,
    VerificationRun,
)


def run_context(run: VerificationRun, observed: dict[str, Any] | None = None) -> Context:
    """What a contract's paths read for `run`: its input, the action's result, the operation,
    and what the channels observed (empty before an attempt)."""
    return Context(
        observed=observed or {},
        action_result=run.action_result,
        input=run.input,
        operation_id=run.operation_id,
        operation_created_at=run.operation_created_at,
    )


def verification_start(
    *,
    contract_id: str,
    operation_id: str,
    operation_created_at: datetime,
    input: dict[str, Any],
    action_result: dict[str, Any],
) -> VerificationRun:
    """Start observing one operation under a contract. Idempotent: the same contract and operation
    give the same run. Raises ValueError if a required correlation key does not resolve."""
    run = verification_prepare(
        contract_id=contract_id,
        operation_id=operation_id,
        operation_created_at=operation_created_at,
        input=input,
        action_result=action_result,
    )
    try:
        with transaction.atomic():
            inserted = db.execute(run.statements())[0]
    except IntegrityError:  # started concurrently by another caller
        return VerificationRun.objects.get(contract_id=contract_id, operation_id=operation_id)
    return run.saved(inserted)


@dataclass
class PreparedRun:
    """A run resolved and scheduled, not yet saved: its INSERT and its keys' go into the batch of
    the transaction that starts it (core.db.execute); `saved` after the batch ran."""

    run: VerificationRun
    keys: dict[str, str]

    def statements(self) -> list[db.Statement]:
        """The run's INSERT (RETURNING its id) and its keys' INSERT. A run of the same contract and
        operation that exists already makes the INSERT fail (IntegrityError): the caller's
        transaction rolls back."""
        statements = [db.insert(self.run)]
        if self.keys:
            table = connection.ops.quote_name(RunKey._meta.db_table)
            run_id, run_params = db.Ref(VerificationRun, self.run.public_id).sql()
            rows = ", ".join(f"({run_id}, %s, %s)" for _ in self.keys)
            params = [p for name, value in self.keys.items() for p in (*run_params, name, value)]
            statements.append(
                db.Statement(
                    f"INSERT INTO {table} (run_id, name, value) VALUES {rows}",  # noqa: S608
                    tuple(params),
                )
            )
        return statements

    def saved(self, rows: list[tuple[Any, ...]]) -> VerificationRun:
        """The run, with the id its INSERT returned (`rows`: that statement's result)."""
        db.inserted(self.run, rows)
        return self.run


def verification_prepare(
    *,
    contract_id: str,
    operation_id: str,
    operation_created_at: datetime,
    input: dict[str, Any],
    action_result: dict[str, Any],
) -> PreparedRun:
    """The run `verification_start` saves: its correlation keys resolved (ValueError if a
    required one does not resolve), its first attempt and its deadline scheduled. Reads nothing."""
    contract = get_contract(contract_id)
    draft = VerificationRun(
        contract_id=contract_id,
        operation_id=operation_id,
        operation_created_at=operation_created_at,
        input=input,
        action_result=action_result,
    )
    context = run_context(draft)
    keys: dict[str, Any] = {}
    for correlation in contract.correlation:
        for name, path in correlation.keys.items():
            value = context.resolve(path)
            if missing(value) or value is None:
                if correlation.required:
                    raise ValueError(
                        f"{contract_id}: required correlation key {name} ({path}) does not resolve"
                    )
                continue
            keys[name] = value
    draft.contract_version = contract.version
    draft.correlation = keys
    draft.next_attempt_at = operation_created_at + timedelta(
        seconds=contract.timing.delay_before(1)
    )
    draft.deadline_at = operation_created_at + timedelta(milliseconds=contract.timing.timeout_ms)
    return PreparedRun(draft, {name: str(value)[:255] for name, value in keys.items()})
