from celery import shared_task

from agents.oauth.registration import dynamic_clients_expire


@shared_task(name="agents.expire_unused_clients")
def expire_unused_clients() -> int:
    """Remove self-registered OAuth clients nobody used for MCP_DYNAMIC_CLIENT_UNUSED_DAYS."""
    return dynamic_clients_expire()
