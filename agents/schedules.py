from core.periodic import Schedule

SCHEDULES = [
    Schedule(
        name="agents: expire unused clients",
        task="agents.expire_unused_clients",
        every_seconds=86400,
        description="Removes self-registered OAuth clients unused for "
        "MCP_DYNAMIC_CLIENT_UNUSED_DAYS (no code or live token).",
    ),
]
