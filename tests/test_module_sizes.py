"""A room fits in a head (STYLE rule 16, issue 25): no module of an app, migrations aside, is
longer than 600 lines. A module that grows past it becomes a package of one module per concern."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
APPS = (
    "config", "core", "accounts", "envelopes", "disputes", "verification", "receipts",
    "reconciliation", "providers", "stripe_sandbox", "stripe_contract", "ops", "agents",
)  # fmt: skip
LIMIT = 600


def test_no_module_of_an_app_is_longer_than_600_lines() -> None:
    modules = [
        path
        for app in APPS
        for path in (ROOT / app).rglob("*.py")
        if "migrations" not in path.parts
    ]
    assert len(modules) > 200  # the apps were found
    too_long = {
        str(path.relative_to(ROOT)): lines
        for path in modules
        if (lines := len(path.read_text().splitlines())) > LIMIT
    }
    assert too_long == {}
