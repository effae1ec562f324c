from core.periodic import Schedule

# The job that sends legs waiting for room in Stripe's rate limit (envelopes.services.waiting):
# its slot's name, which a long run holds (core.ticks.tick_hold).
WAITING_SCHEDULE = "envelopes: send legs waiting for room"

SCHEDULES = [
    Schedule(
        name="envelopes: resume stranded legs",
        task="envelopes.resume_stranded",
        every_seconds=30,
        description="Repeats provider calls whose outcome is unknown, with the same key.",
    ),
    Schedule(
        name=WAITING_SCHEDULE,
        task="envelopes.send_waiting",
        every_seconds=1,
        description="Sends refunds and payments that found Stripe's rate limit full, oldest first, "
        "as room frees (same keys).",
    ),
    Schedule(
        name="envelopes: follow refunds' references",
        task="envelopes.follow_refund_references",
        every_seconds=60,
        description="Reads again refunds whose reference at the card network (the ARN a buyer's "
        "bank needs) Stripe has not settled yet, less often as they age, for three weeks at most.",
    ),
]
