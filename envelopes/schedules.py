from core.periodic import Schedule

SCHEDULES = [
    Schedule(
        name="envelopes: resume stranded legs",
        task="envelopes.resume_stranded",
        every_seconds=30,
        description="Repeats provider calls whose outcome is unknown, with the same key.",
    ),
    Schedule(
        name="envelopes: send legs waiting for room",
        task="envelopes.send_waiting",
        every_seconds=1,
        description="Sends refunds and payments that found Stripe's rate limit full, oldest first, "
        "as room frees (same keys).",
    ),
]
