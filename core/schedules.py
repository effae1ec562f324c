from core.periodic import Schedule

SCHEDULES = [
    Schedule(
        name="core: prune expired sessions",
        task="core.tasks.sessions_prune",
        every_seconds=24 * 60 * 60,
        description="Deletes login sessions that have expired.",
    ),
]

SCHEDULES.append(
    Schedule(
        name="core: prune idempotency keys",
        task="core.tasks.idempotency_prune",
        every_seconds=24 * 60 * 60,
        description="Deletes finished idempotency records older than IDEMPOTENCY_KEEP_DAYS.",
    )
)
