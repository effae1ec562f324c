from core.periodic import Schedule

SCHEDULES = [
    Schedule(
        name="disputes: resume interrupted filings",
        task="disputes.resume_filings",
        every_seconds=60,
        description="Repeats a filing call left without a recorded answer, and a dispute's "
        "setting to manual submission left without one, with the same key.",
    ),
    Schedule(
        name="disputes: deadline reminders",
        task="disputes.remind_deadlines",
        every_seconds=600,
        description="E-mails ops and opens an escalation 72 h and 24 h before a dispute's "
        "deadline while no response is filed (once each).",
    ),
]
