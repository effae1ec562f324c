"""bench/mutate.py, the mutation-testing command (issue 16): which mutants it makes of a source,
that their ids survive unrelated edits, and a tiny run end to end (a killed mutant, a survivor, an
equivalent one set aside). No database: the end-to-end run uses a throw-away module, no Django."""

import ast
import importlib.util
import subprocess
import sys
import textwrap
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[2]


def _tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_mutate", REPO / "bench" / "mutate.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_mutate"] = module
    spec.loader.exec_module(module)
    return module


mutate = _tool()

SAMPLE = '''
from typing import TYPE_CHECKING


def pick(values: list[int], limit: int = 7) -> int:
    """A docstring "with a string" is never mutated."""
    if TYPE_CHECKING:
        print("never")
    total: int = 0
    for value in values:
        if value < limit and not value == 0:
            continue
        if value in values:
            break
        total += -value * 2
    return max(total, 1) if any(values) else None


class Box:
    """Its docstring too."""

    @property
    def flag(self) -> bool:
        return self.ready is True or "x"
'''


def _ids(source: str) -> list[str]:
    return [m.id for m in mutate.find_mutants(ast.parse(source))]


def _pairs(source: str) -> set[tuple[str, str, str]]:
    return {(m.operator, m.original, m.mutant) for m in mutate.find_mutants(ast.parse(source))}


def test_each_operator_makes_its_mutant() -> None:
    pairs = _pairs(SAMPLE)
    expected = {
        ("compare", "value < limit", "value <= limit"),
        ("compare", "value == 0", "value != 0"),
        ("compare", "value in values", "value not in values"),
        ("compare", "self.ready is True", "self.ready is not True"),
        ("boolop", "value < limit and (not value == 0)", "value < limit or not value == 0"),
        ("not", "not value == 0", "value == 0"),
        ("arith", "total += -value * 2", "total -= -value * 2"),
        ("arith", "-value * 2", "-value / 2"),
        ("unary", "-value", "value"),
        ("number", "0", "1"),
        ("number", "2", "3"),
        ("number", "1", "2"),
        ("bool", "True", "False"),
        ("string", "'x'", "'XXxXX'"),
        ("loop", "continue", "break"),
        ("loop", "break", "continue"),
        ("call", "max(total, 1)", "min(total, 1)"),
        ("call", "any(values)", "all(values)"),
        ("return", "return self.ready is True or 'x'", "return None"),
    }
    assert expected <= pairs, expected - pairs
    # `return ... else None` is mutated; a plain `return None` is not.
    assert any(p[0] == "return" and p[1].startswith("return max(") for p in pairs)


def test_docstrings_annotations_defaults_and_type_checking_are_left_alone() -> None:
    shown = " ".join(f"{m.original} {m.mutant}" for m in mutate.find_mutants(ast.parse(SAMPLE)))
    assert "docstring" not in shown
    assert "never" not in shown  # inside `if TYPE_CHECKING`
    assert not {"7", "8"} & set(shown.split())  # the default `limit: int = 7`
    assert "int" not in shown.split()  # annotations


def test_ids_survive_lines_added_above_and_count_identical_mutants() -> None:
    before = _ids(SAMPLE)
    shifted = "import os\n\n\nX = 1\n" + SAMPLE
    assert _ids(shifted) == before
    lines = {m.id: m.line for m in mutate.find_mutants(ast.parse(shifted))}
    assert all(line > 4 for line in lines.values())
    ids = _ids("def f(a):\n    return a + 1 + 1\n")
    assert "f|number|1->2|0" in ids
    assert "f|number|1->2|1" in ids
    assert len(ids) == len(set(ids))


def test_functions_filter_takes_globs() -> None:
    tree = ast.parse(SAMPLE)
    assert {m.qualname for m in mutate.find_mutants(tree, ["Box.*"])} == {"Box.flag"}


def test_a_run_kills_a_mutant_reports_a_survivor_and_sets_an_equivalent_aside(
    tmp_path: Path,
) -> None:
    (tmp_path / "sample.py").write_text(
        textwrap.dedent(
            '''
            def double(x):
                """Twice x."""
                return x * 2


            def unused(x):
                return x + 1
            '''
        )
    )
    (tmp_path / "test_sample.py").write_text(
        "from sample import double\n\n\ndef test_double():\n    assert double(3) == 6\n"
    )
    (tmp_path / "mutation").mkdir()
    (tmp_path / "mutation" / "sample.toml").write_text(
        textwrap.dedent(
            """
            tests = ["test_sample.py"]

            [[equivalent]]
            id = "unused|number|1->2|0"
            reason = "nobody calls it"

            [[equivalent]]
            id = "gone|number|1->2|0"
            reason = "stale on purpose"
            """
        )
    )
    report = tmp_path / "REPORT.md"
    report.write_text("# Prose that stays\n")
    done = subprocess.run(
        [
            sys.executable, str(REPO / "bench" / "mutate.py"), "--root", str(tmp_path),
            "--config-dir", str(tmp_path / "mutation"), "--jobs", "2", "--report", str(report),
        ],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False,
        env={"PATH": "/usr/bin:/bin", "DJANGO_SETTINGS_MODULE": ""},
    )  # fmt: skip
    out = done.stdout + done.stderr
    # double: return None, * -> /, 2 -> 3 killed; unused: return None, + -> - survive.
    assert "sample: 6 mutants, 3 killed (0 by timeout), 2 survived, 1 equivalent" in out, out
    assert "score 60.0%" in out, out
    assert "sample.py:8  unused|arith|x + 1->x - 1|0  x + 1 -> x - 1" in out, out
    assert "'gone|number|1->2|0' matches no mutant" in out, out
    assert done.returncode == 1, out  # under the 95% bar
    text = report.read_text()
    assert text.startswith("# Prose that stays\n")
    assert "| `sample` | 6 | 3 | 2 | 1 | 0 | 60.0% |" in text, text
    assert "`unused|number|1->2|0`: nobody calls it" in text, text
    # A second run replaces the report, not appends to it.
    mutate.write_report(report, "again\n")
    assert report.read_text().count("again") == 1
    assert mutate.REPORT_START in report.read_text()
