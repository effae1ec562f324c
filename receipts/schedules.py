from core.periodic import Schedule

SCHEDULES = [
    Schedule(
        name="receipts: catch up",
        task="receipts.catch_up",
        every_seconds=300,
        description="Writes the receipts of VERIFIED runs that have none (e.g. no key yet).",
    ),
]
