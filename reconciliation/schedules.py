from core.periodic import Schedule

SCHEDULES = [
    Schedule(
        name="reconciliation: catch up events",
        task="reconciliation.catch_up",
        every_seconds=600,
        description="Lists the provider's events since the last cursor (minus 10 minutes) and "
        "processes those no webhook brought: a lost webhook is repaired within one run.",
    ),
    Schedule(
        name="reconciliation: sweep",
        task="reconciliation.sweep",
        every_seconds=3600,
        description="Compares the last 7 days of refunds, charges and disputes with the ledger.",
    ),
    Schedule(
        name="reconciliation: full",
        task="reconciliation.full",
        every_seconds=86400,
        description="Compares the last 90 days of refunds, charges and disputes with the ledger.",
    ),
]
