from core.periodic import Schedule

SCHEDULES = [
    Schedule(
        name="envelopes: resume stranded legs",
        task="envelopes.resume_stranded",
        every_seconds=30,
        description="Repeats provider calls whose outcome is unknown, with the same key.",
    ),
]
