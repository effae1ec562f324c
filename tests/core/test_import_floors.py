"""The floors are checked, not hoped for (STYLE rules 13, 15;
docs/decisions/0008-import-floors.md).

`make lint` runs import-linter's contracts from pyproject.toml. These tests run `make lint` on a
throw-away copy of the project: unchanged it passes, and one import that breaks a floor makes it
fail, naming the contract."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
VENV = Path(sys.prefix)  # the venv running the suite


def _copy(tmp_path: Path) -> Path:
    tracked = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    copy = tmp_path / "vouch"
    for raw in tracked:
        if not raw:
            continue
        name = raw.decode()
        source = ROOT / name
        if not source.is_file():
            continue  # deleted in the work tree, not yet committed
        target = copy / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)
    return copy


def _lint(copy: Path) -> subprocess.CompletedProcess[str]:
    # The project's own venv, made to look installed so make does not reinstall into it.
    return subprocess.run(
        ["make", "--no-print-directory", "-o", f"{VENV}/.installed-dev", "lint", f"VENV={VENV}"],
        cwd=copy,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "COLUMNS": "200"},
    )


def _append(path: Path, line: str) -> None:
    """One more import at the end of `path`, formatted and marked so that only the import
    contracts can object to it (not ruff's own checks)."""
    path.write_text(path.read_text() + f"\n{line}  # noqa: E402, F401\n")
    subprocess.run([str(VENV / "bin" / "ruff"), "format", "-q", str(path)], check=True)


def test_the_contracts_have_no_ignored_imports() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    contracts = config["contracts"]
    assert {c["id"] for c in contracts} >= {
        "layers",
        "no-sandbox",
        "generic-engines",
        "surfaces-never-reach-stripe",
        "one-door-to-stripe",
        "core-is-the-ground-floor",
        "contract-for-providers-only",
        "contract-knows-no-app",
    }
    assert all("ignore_imports" not in c for c in contracts)


def test_make_lint_passes_on_an_unchanged_copy(tmp_path: Path) -> None:
    run = _lint(_copy(tmp_path))
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Contracts: 8 kept, 0 broken." in run.stdout


@pytest.mark.parametrize(
    ("module", "line", "contract"),
    [
        (
            "envelopes/money.py",
            "import stripe_sandbox.server",
            "No production app imports the sandbox",
        ),
        ("core/timing.py", "import accounts.models", "core imports no app of ours"),
        (
            "verification/selectors.py",
            "import envelopes.models",
            "verification and providers know no domain app",
        ),
        (
            "agents/services.py",
            "import providers",
            "Surfaces (MCP tools, ops) never import providers",
        ),
        ("reconciliation/selectors.py", "import stripe", "Only providers imports the stripe SDK"),
        (
            "envelopes/selectors/lists.py",
            "import disputes.models",
            "Apps import downward only",
        ),
    ],
)
def test_one_import_across_a_floor_makes_make_lint_fail(
    tmp_path: Path, module: str, line: str, contract: str
) -> None:
    copy = _copy(tmp_path)
    target = copy / module
    if not target.exists():  # a module split into a package keeps its name as __init__.py
        target = copy / module.removesuffix(".py") / "__init__.py"
    _append(target, line)
    run = _lint(copy)
    assert run.returncode != 0
    assert "BROKEN" in run.stdout
    broken = [row for row in run.stdout.splitlines() if row.endswith("BROKEN")]
    assert len(broken) >= 1
    assert any(row.startswith(contract) for row in broken), run.stdout
