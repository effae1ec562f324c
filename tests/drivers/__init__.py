"""The drivers tests share: a logged-in API client and the buyers (`api`), the people and
disputes of dispute tests (`disputes`), a live ASGI server and the MCP SDK's client (`mcp`).
Their fixtures are registered for the whole suite by tests/conftest.py (`pytest_plugins`);
their classes and helpers are imported from here."""
