from core.periodic import Schedule

SCHEDULES = [
    Schedule(
        name="disputes: resume interrupted filings",
        task="disputes.resume_filings",
        every_seconds=60,
        description="Repeats a filing call left without a recorded answer, with the same key.",
    ),
]
