"""The docs hold what the code points to (STYLE "Docs" and rule 17): every `SPEC §N` the code cites
has its page in docs/spec/ (and every `SPEC §N.M` its heading there), the README stays a front
door, every decision record has its three parts and is named by the code it governs, and the
settings and commands the docs name exist. No database: these read files."""

import re
import subprocess
import sys
import threading
from html.parser import HTMLParser
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
SPEC_DOCS = DOCS / "spec"
DECISIONS = DOCS / "decisions"
CITATION = re.compile(r"SPEC §(\d+(?:\.\d+)*)")
SKIP_DIRS = {".git", ".venv", "node_modules", "var", "docs", ".mypy_cache", ".ruff_cache"}


def _tracked(*suffixes: str) -> list[Path]:
    """The repository's files with one of `suffixes`, outside docs/ and the tool folders."""
    return sorted(
        path
        for path in ROOT.rglob("*")
        if path.suffix in suffixes
        and path.is_file()
        and not SKIP_DIRS.intersection(path.relative_to(ROOT).parts)
    )


def _citations() -> dict[str, list[str]]:
    """Each section cited as `SPEC §N[.M]` in the code (Python, templates, contracts): where."""
    found: dict[str, list[str]] = {}
    for path in _tracked(".py", ".html", ".yaml"):
        for number in CITATION.findall(path.read_text(errors="replace")):
            found.setdefault(number, []).append(str(path.relative_to(ROOT)))
    return found


def _spec_headings() -> dict[str, Path]:
    """The sections docs/spec/ has a heading for (`# §15. …`, `## §15.4 …`), and their page."""
    headings: dict[str, Path] = {}
    for page in sorted(SPEC_DOCS.glob("*.md")):
        for match in re.finditer(r"^#{1,3} §(\d+(?:\.\d+)*)\.? ", page.read_text(), flags=re.M):
            headings[match.group(1)] = page
    return headings


def test_the_code_cites_the_spec() -> None:
    # Guards the test below against passing vacuously (a moved folder, a changed citation style).
    assert len(_citations()) >= 15


def test_every_spec_citation_has_its_page_and_heading() -> None:
    headings = _spec_headings()
    missing = {
        number: places[:3]
        for number, places in _citations().items()
        if number not in headings  # §15.4 needs its own heading, §3 its page's title
        or not headings[number].name.startswith(f"{int(number.split('.')[0]):02d}-")
    }
    assert not missing, (
        f"SPEC sections cited in the code with no page or heading in docs/spec/: {missing}"
    )


def test_each_spec_page_is_one_top_level_section() -> None:
    for page in sorted(SPEC_DOCS.glob("[0-9]*.md")):
        (title,) = re.findall(r"^# §(\d+)\. ", page.read_text(), flags=re.M)
        assert page.name.startswith(f"{int(title):02d}-"), page.name


def test_the_readme_is_a_front_door() -> None:
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) < 250
    for command in ("make run", "make test"):
        assert command in text
    assert "docs/getting-started.md" in text


def _records() -> list[Path]:
    return sorted(DECISIONS.glob("[0-9][0-9][0-9][0-9]-*.md"))


def test_the_readme_shows_the_money_bodies_and_what_a_missing_key_does() -> None:
    """Issue 27: the README never showed a debit's body (its `reference`) and read as if
    `Idempotency-Key` were required; it is optional, and a retry without it acts again
    (tests/envelopes/test_idempotency.py holds that it does)."""
    text = " ".join((ROOT / "README.md").read_text().split())
    assert '"reference": "claim-42"' in text
    assert '{"amount_micro": 12000000}' in text
    assert "at least 10,000: one cent" in text
    assert "The `Idempotency-Key` header is **optional**, as it is at Stripe" in text
    assert "**without one, a retry acts again**" in text
    api = " ".join((DOCS / "api.md").read_text().split())
    assert "## The `Idempotency-Key` header" in (DOCS / "api.md").read_text()
    assert "**It is optional, and without it a retry acts again**" in api


def test_the_decision_records_are_numbered_without_gaps() -> None:
    numbers = [int(record.name[:4]) for record in _records()]
    assert numbers == list(range(1, len(numbers) + 1)), numbers
    assert len(numbers) >= 7


@pytest.mark.parametrize("record", _records(), ids=lambda record: record.name)
def test_a_decision_record_has_status_date_context_decision_consequences(record: Path) -> None:
    text = record.read_text()
    assert re.match(rf"# {record.name[:4]}\. \S", text), "the title names its number"
    assert re.search(r"^- Status: \w", text, flags=re.M)
    assert re.search(r"^- Date: \d{4}-\d{2}-\d{2}$", text, flags=re.M)
    sections = re.findall(r"^## (.+)$", text, flags=re.M)
    assert sections[:3] == ["Context", "Decision", "Consequences"], sections


def test_the_decisions_index_lists_every_record() -> None:
    index = (DECISIONS / "index.md").read_text()
    for record in _records():
        assert f"]({record.name})" in index, record.name


@pytest.mark.parametrize("record", _records(), ids=lambda record: record.name)
def test_a_decision_record_is_named_by_the_code_it_governs(record: Path) -> None:
    """STYLE rule 17: the code a record governs names it in a comment, so whoever changes that
    code finds the reasons first."""
    name = f"docs/decisions/{record.name}"
    naming = [
        path
        for path in _tracked(".py", ".toml", ".yaml", ".html")
        if "tests" not in path.relative_to(ROOT).parts and name in path.read_text(errors="replace")
    ]
    assert naming, f"no code names {name} in a comment"


def _settings_source() -> str:
    return "\n".join(
        path.read_text() for path in sorted((ROOT / "config" / "settings").glob("*.py"))
    )


def test_the_settings_the_docs_name_exist() -> None:
    """Every variable in the settings table is read somewhere in the code (config/settings,
    gunicorn.conf.py, or an app that reads the environment itself)."""
    table = (DOCS / "operations" / "settings.md").read_text()
    names = set(re.findall(r"^\| `([A-Z][A-Z0-9_]+)`", table, flags=re.M))
    names |= set(re.findall(r"`([A-Z][A-Z0-9_]{3,})`", table.split("| variable |")[1]))
    assert len(names) > 40
    code = _settings_source() + "\n".join(
        path.read_text(errors="replace") for path in _tracked(".py") if "tests" not in path.parts
    )
    missing = sorted(name for name in names if not re.search(rf"[\"']{name}[\"']", code))
    assert not missing, missing


def test_the_commands_the_docs_name_exist() -> None:
    commands = {
        path.stem
        for path in ROOT.glob("*/management/commands/*.py")
        if not path.name.startswith("_")
    }
    targets = set(re.findall(r"^([a-z][a-z-]*):", (ROOT / "Makefile").read_text(), flags=re.M))
    text = (
        "\n".join(page.read_text() for page in DOCS.rglob("*.md"))
        + (ROOT / "README.md").read_text()
    )
    named = set(re.findall(r"manage\.py ([a-z][a-z0-9_]*)", text))
    builtin = {"shell", "migrate", "check", "createsuperuser", "makemigrations"}
    assert named - builtin <= commands, named - builtin - commands
    made = set(re.findall(r"`make ([a-z-]+)", text))
    assert made <= targets, made - targets


@pytest.fixture(scope="module")
def built_site(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[subprocess.CompletedProcess[str], Path]:
    """`mkdocs build --strict` into a temporary folder, once for the tests that read the site."""
    # The venv running the suite: requirements/dev.txt installs mkdocs, so it missing is a failure.
    mkdocs = Path(sys.prefix) / "bin" / "mkdocs"
    assert mkdocs.exists(), "mkdocs is not installed: `make test` installs requirements/dev.txt"
    site = tmp_path_factory.mktemp("docs") / "site"
    done = subprocess.run(
        [str(mkdocs), "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin"},
    )
    return done, site


def test_the_docs_build_strict(built_site: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    """mkdocs --strict: no broken link, no missing snippet (bench/README.md, bench/MUTATION.md,
    stripe_sandbox/README.md are included from outside docs/), no page out of the nav."""
    done, _ = built_site
    assert done.returncode == 0, done.stdout + done.stderr


NESTED_LINK = re.compile(r"\[\[[^\]]*\]\([^)]*\)\]\(")


def test_no_link_is_nested_in_another() -> None:
    """Issue 41: `[[SPEC §1](spec/01-money.md)](spec/01-money.md)` passes --strict (the outer link
    is good) and shows the inner one as literal text on the page."""
    pages = [*sorted(DOCS.rglob("*.md")), ROOT / "README.md"]
    nested = [
        f"{page.relative_to(ROOT)}:{number}"
        for page in pages
        for number, line in enumerate(page.read_text().splitlines(), start=1)
        if NESTED_LINK.search(line)
    ]
    assert not nested, f"a link inside a link's text: {nested}"


class _ProseText(HTMLParser):
    """The text a reader sees on a built page, outside code, scripts and styles."""

    SKIPPED = frozenset({"code", "pre", "script", "style"})

    def __init__(self) -> None:
        super().__init__()
        self.depth = 0
        self.parts: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.depth += tag in self.SKIPPED

    def handle_endtag(self, tag: str) -> None:
        self.depth -= tag in self.SKIPPED

    def handle_data(self, data: str) -> None:
        if not self.depth:
            self.parts.append(data)


def test_no_built_page_shows_markdown_link_syntax(
    built_site: tuple[subprocess.CompletedProcess[str], Path],
) -> None:
    """Whatever the Markdown slip (a nested link, a space before the parenthesis, a bracket in
    a link's text), a link that did not become one leaves a literal `](` in the page's prose."""
    done, site = built_site
    assert done.returncode == 0, done.stdout + done.stderr
    pages = sorted(site.rglob("*.html"))
    assert len(pages) > 40
    shown = []
    for page in pages:
        text = _ProseText()
        text.feed(page.read_text())
        prose = " ".join("".join(text.parts).split())
        shown += [
            f"{page.relative_to(site)}: …{prose[max(0, at - 40) : at + 40]}…"
            for at in [match.start() for match in re.finditer(r"\]\(", prose)]
        ]
    assert not shown, "\n".join(shown)


def test_the_walkthrough_runs_afresh_with_new_keys(tmp_path: Path) -> None:
    """Issue 41: pasted again, the walkthrough replayed its first answers (its fixed
    `Idempotency-Key`s: "unspent 25000000" where $13 was left). The page says why, and its
    `session_post` helper adds `DEMO_RUN` to every key, so a second run acts afresh."""
    page = (DOCS / "getting-started.md").read_text()
    start = page.index("<!-- demo:start -->")
    helpers = re.search(r"^```sh\n(.*?)^```$", page[start:], flags=re.S | re.M)
    assert helpers is not None
    assert "session_post()" in helpers.group(1)
    keys: list[str | None] = []

    class Recorder(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            keys.append(self.headers.get("Idempotency-Key"))
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(201)
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        script = helpers.group(1) + (
            "session_post demo-create-1 /api/v1/escrow/envelopes '{}'\n"
            "DEMO_RUN=2 session_post demo-create-1 /api/v1/escrow/envelopes '{}'\n"
        )
        done = subprocess.run(
            ["bash", "-euc", script],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=tmp_path,
            env={"PATH": "/usr/bin:/bin", "BASE": f"http://127.0.0.1:{server.server_port}"},
        )
    finally:
        server.shutdown()
    assert done.returncode == 0, done.stderr
    assert keys == ["demo-create-1", "demo-create-1-2"]
    note = " ".join(page[page.index("<!-- demo:end -->") :].split())
    assert "Running it again" in note
    for words in ("replay", "`DEMO_RUN=2`", "`make reset`"):
        assert words in note
