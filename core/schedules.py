from core.periodic import Schedule

SCHEDULES = [
    Schedule(
        name="core: prune expired sessions",
        task="core.tasks.sessions_prune",
        every_seconds=24 * 60 * 60,
        description="Deletes login sessions that have expired.",
    ),
]
