"""Mutation testing of the core logic (issue 16): does the fast test subset of a module notice when
its code is changed a little?

    .venv/bin/python bench/mutate.py                          # every module in bench/mutation/
    .venv/bin/python bench/mutate.py --module envelopes.money --jobs 2
    .venv/bin/python bench/mutate.py --module receipts.canonical --list   # the mutants, no run
    .venv/bin/python bench/mutate.py --report bench/MUTATION.md           # also write the report

Each module has a config, bench/mutation/<dotted.module>.toml: `tests` (pytest node ids or files:
the fast subset that covers it), optional `functions` (qualnames to mutate, `Class.*` globs;
default every function), and `[[equivalent]]` entries (`id`, `reason`) set aside from the score.

Mutants are made in memory, never on disk: the module's AST is changed at one place (comparison,
arithmetic, boolean operator, `not`, constant, `return x` -> `return None`, max/min, any/all,
break/continue), compiled with its original line numbers, and the changed function's code object
is put into the live function (`fn.__code__ = ...`) in a forked child, which then runs the test
subset with pytest.main. Every object keeps its identity, so `from x import f` elsewhere sees the
mutant too. A mutant is killed when the tests fail (or time out), survives when they pass.

A mutant's id survives unrelated edits of the file:
`<qualname>|<operator>|<original>-><mutant>|<n>`, n counting the identical (operator, original,
mutant) in the same function from 0.

Environment: DATABASE_URL (default postgres://postgres@127.0.0.1:5432/vouch_mutate),
CELERY_BROKER_URL (default redis://127.0.0.1:6379/13). The baseline run creates (or migrates)
the test database; each parallel job then runs on its own copy of it (CREATE DATABASE ...
TEMPLATE), so no two tests share one database at once. Exit code: 0, or 1 when a module scores
under --fail-under, 2 on a failing baseline or a bad config.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import fnmatch
import os
import signal
import sys
import time
import tomllib
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
CONFIG_DIR = REPO / "bench" / "mutation"
DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/vouch_mutate"
DEFAULT_BROKER_URL = "redis://127.0.0.1:6379/13"
REPORT_START = "<!-- mutate: report start (bench/mutate.py rewrites what is between) -->"
REPORT_END = "<!-- mutate: report end -->"
ERROR_EXIT = 90  # a child that could not put the mutant in place

# --- mutants ------------------------------------------------------------------------------------

COMPARE_SWAPS: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
}
ARITH_SWAPS: dict[type[ast.operator], type[ast.operator]] = {
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.Div,
    ast.Div: ast.Mult,
    ast.FloorDiv: ast.Div,
    ast.Mod: ast.Div,
    ast.Pow: ast.Mult,
    ast.LShift: ast.RShift,
    ast.RShift: ast.LShift,
    ast.BitAnd: ast.BitOr,
    ast.BitOr: ast.BitAnd,
    ast.BitXor: ast.BitAnd,
}
CALL_SWAPS = {"max": "min", "min": "max", "any": "all", "all": "any"}
SNIPPET_MAX = 80


@dataclass
class Mutant:
    """One change at one place. `apply` makes it on the tree it was found in (the tree is then
    compiled in a forked child, never in the parent)."""

    qualname: str  # the function (reachable from the module) whose code object changes
    operator: str
    original: str
    mutant: str
    line: int
    apply: Callable[[], None] = field(repr=False)
    n: int = 0

    @property
    def id(self) -> str:
        return f"{self.qualname}|{self.operator}|{self.original}->{self.mutant}|{self.n}"


def _snippet(node: ast.AST) -> str:
    text = " ".join(ast.unparse(node).split())
    return text if len(text) <= SNIPPET_MAX else text[: SNIPPET_MAX - 1] + "…"


def _is_docstring(stmt: ast.stmt) -> bool:
    return (
        isinstance(stmt, ast.Expr)
        and isinstance(stmt.value, ast.Constant)
        and isinstance(stmt.value.value, str)
    )


def _is_type_checking(node: ast.AST) -> bool:
    if not isinstance(node, ast.If):
        return False
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


class _Finder:
    """Walks one top-level function (or method) body in a fixed order and records every mutant."""

    def __init__(self, qualname: str) -> None:
        self.qualname = qualname
        self.found: list[Mutant] = []

    # Each site: `owner` is what is shown (before and after), `put(new)` places the change.
    def _site(
        self,
        operator: str,
        owner: ast.AST,
        line: int,
        put: Callable[[], Callable[[], None]],
        shown_after: ast.AST | None = None,
    ) -> None:
        before = _snippet(owner)
        undo = put()
        after = _snippet(shown_after if shown_after is not None else owner)
        undo()
        if before == after:
            return

        def apply() -> None:
            put()

        self.found.append(Mutant(self.qualname, operator, before, after, line, apply))

    def _replace(
        self,
        operator: str,
        holder: ast.AST,
        name: str,
        index: int | None,
        new: Any,
        owner: ast.AST | None = None,
    ) -> None:
        """A site that replaces `holder.name` (or `holder.name[index]`) with `new`."""

        def put() -> Callable[[], None]:
            if index is None:
                old = getattr(holder, name)
                setattr(holder, name, new)
                return lambda: setattr(holder, name, old)
            seq = getattr(holder, name)
            old = seq[index]
            seq[index] = new
            return lambda: seq.__setitem__(index, old)

        target = owner if owner is not None else holder
        line: int = getattr(target, "lineno", None) or getattr(holder, "lineno", None) or 0
        current = getattr(holder, name) if index is None else getattr(holder, name)[index]
        # The shown node itself replaced (a `not`, a unary minus, a break): show the new one.
        self._site(operator, target, line, put, new if current is target else None)

    def body(self, stmts: list[ast.stmt], holder: ast.AST, name: str) -> None:
        for i, stmt in enumerate(stmts):
            if i == 0 and _is_docstring(stmt):
                continue
            self.visit(stmt, holder, name, i)

    def visit(self, node: ast.AST, holder: ast.AST, name: str, index: int | None) -> None:
        if _is_type_checking(node):
            return
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for i, deco in enumerate(node.decorator_list):
                self.visit(deco, node, "decorator_list", i)
            self.body(node.body, node, "body")  # not its arguments: annotations and defaults
            return
        if isinstance(node, ast.Lambda):
            self.visit(node.body, node, "body", None)
            return
        if isinstance(node, ast.ClassDef):
            self.body(node.body, node, "body")
            return
        if isinstance(node, ast.Expr) and _is_docstring(node):
            return  # a bare string statement: it does nothing
        if isinstance(node, ast.AnnAssign):
            if node.value is not None:
                self.visit(node.target, node, "target", None)
                self.visit(node.value, node, "value", None)
            return
        if isinstance(node, ast.JoinedStr):
            for part in node.values:
                if isinstance(part, ast.FormattedValue):
                    self.visit(part.value, part, "value", None)
            return
        self.mutate(node, holder, name, index)
        if isinstance(node, ast.Call) and _is_cast(node):
            children: Iterator[tuple[str, int | None, ast.AST]] = (
                (n, i, c) for n, i, c in _children(node) if not (n == "args" and i == 0)
            )
        else:
            children = _children(node)
        for child_name, child_index, child in children:
            self.visit(child, node, child_name, child_index)

    def mutate(self, node: ast.AST, holder: ast.AST, name: str, index: int | None) -> None:
        if isinstance(node, ast.Compare):
            for i, op in enumerate(node.ops):
                if (swap := COMPARE_SWAPS.get(type(op))) is not None:
                    self._replace("compare", node, "ops", i, swap(), node)
        elif isinstance(node, ast.BinOp | ast.AugAssign):
            if (swap_op := ARITH_SWAPS.get(type(node.op))) is not None:
                self._replace("arith", node, "op", None, swap_op(), node)
        elif isinstance(node, ast.UnaryOp):
            if isinstance(node.op, ast.Not):
                self._replace("not", holder, name, index, node.operand, node)
            elif isinstance(node.op, ast.USub | ast.UAdd | ast.Invert):
                self._replace("unary", holder, name, index, node.operand, node)
        elif isinstance(node, ast.BoolOp):
            swap_bool = ast.Or() if isinstance(node.op, ast.And) else ast.And()
            self._replace("boolop", node, "op", None, swap_bool, node)
        elif isinstance(node, ast.Constant):
            new = _constant_mutant(node.value)
            if new is not None:
                operator, value = new
                shown = holder if isinstance(holder, ast.keyword) else node
                self._replace(operator, node, "value", None, value, shown)
        elif isinstance(node, ast.Return):
            value = node.value
            if value is not None and not (isinstance(value, ast.Constant) and value.value is None):
                none = ast.copy_location(ast.Constant(None), value)
                self._replace("return", node, "value", None, none, node)
        elif isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name) and func.id in CALL_SWAPS:
                swapped = ast.copy_location(ast.Name(CALL_SWAPS[func.id], ast.Load()), func)
                self._replace("call", node, "func", None, swapped, node)
        elif isinstance(node, ast.Break | ast.Continue):
            other = ast.Continue() if isinstance(node, ast.Break) else ast.Break()
            self._replace("loop", holder, name, index, ast.copy_location(other, node), node)


def _is_cast(call: ast.Call) -> bool:
    func = call.func
    return (isinstance(func, ast.Name) and func.id == "cast") or (
        isinstance(func, ast.Attribute) and func.attr == "cast"
    )


def _constant_mutant(value: Any) -> tuple[str, Any] | None:
    if isinstance(value, bool):
        return "bool", not value
    if isinstance(value, int | float) and not isinstance(value, complex):
        return "number", value + 1
    if isinstance(value, str):
        return "string", f"XX{value}XX"
    return None


def _children(node: ast.AST) -> Iterator[tuple[str, int | None, ast.AST]]:
    for name, value in ast.iter_fields(node):
        if name in {"annotation", "returns", "type_comment"}:
            continue
        if isinstance(value, list):
            for i, item in enumerate(value):
                if isinstance(item, ast.AST):
                    yield name, i, item
        elif isinstance(value, ast.AST):
            yield name, None, value


def _functions(tree: ast.Module) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """Every function reachable as a module or class attribute, with its qualname."""

    def walk(stmts: list[ast.stmt], prefix: str) -> Iterator[Any]:
        for stmt in stmts:
            if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
                yield prefix + stmt.name, stmt
            elif isinstance(stmt, ast.ClassDef):
                yield from walk(stmt.body, f"{prefix}{stmt.name}.")

    yield from walk(tree.body, "")


def find_mutants(tree: ast.Module, functions: list[str] | None = None) -> list[Mutant]:
    """Every mutant of the function bodies of `tree` (only the qualnames matching `functions`,
    globs allowed, when given), in source order, with stable ids."""
    mutants: list[Mutant] = []
    for qualname, fn in _functions(tree):
        if functions is not None and not any(fnmatch.fnmatchcase(qualname, p) for p in functions):
            continue
        finder = _Finder(qualname)
        finder.body(fn.body, fn, "body")
        seen: dict[tuple[str, str, str], int] = {}
        for m in finder.found:
            key = (m.operator, m.original, m.mutant)
            m.n = seen.get(key, 0)
            seen[key] = m.n + 1
        mutants.extend(finder.found)
    return mutants


# --- config -------------------------------------------------------------------------------------


@dataclass
class ModuleConfig:
    module: str
    tests: list[str]
    functions: list[str] | None
    equivalent: dict[str, str]
    path: Path
    root: Path = REPO

    @property
    def source(self) -> Path:
        return self.root / Path(*self.module.split(".")).with_suffix(".py")


def load_config(path: Path, root: Path = REPO) -> ModuleConfig:
    data = tomllib.loads(path.read_text())
    tests = data.get("tests")
    if not isinstance(tests, list) or not tests:
        raise SystemExit(f"{path}: `tests` must be a non-empty list of pytest node ids")
    equivalent = {}
    for entry in data.get("equivalent", []):
        if not entry.get("id") or not entry.get("reason"):
            raise SystemExit(f"{path}: each [[equivalent]] needs an `id` and a `reason`")
        equivalent[entry["id"]] = entry["reason"]
    return ModuleConfig(path.stem, tests, data.get("functions"), equivalent, path, root)


def all_configs(config_dir: Path = CONFIG_DIR, root: Path = REPO) -> dict[str, ModuleConfig]:
    return {p.stem: load_config(p, root) for p in sorted(config_dir.glob("*.toml"))}


# --- running ------------------------------------------------------------------------------------


def _setup_environment(root: Path) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")
    os.environ.setdefault("DATABASE_URL", DEFAULT_DATABASE_URL)
    os.environ.setdefault("CELERY_BROKER_URL", DEFAULT_BROKER_URL)
    os.chdir(root)
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))


def _django_setup() -> bool:
    try:
        import django
    except ImportError:
        return False
    if os.environ.get("DJANGO_SETTINGS_MODULE"):
        django.setup()
        return True
    return False


def _find_code(code: types.CodeType, qualname: str, firstlineno: int) -> types.CodeType | None:
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            if const.co_qualname == qualname and const.co_firstlineno == firstlineno:
                return const
            found = _find_code(const, qualname, firstlineno)
            if found is not None:
                return found
    return None


def _live_function(module: types.ModuleType, qualname: str, firstlineno: int) -> Any:
    """The function object behind `qualname` in the loaded module: decorators unwrapped
    (`__wrapped__`), properties (fget/fset/fdel), class and static methods (`__func__`)."""
    parts = qualname.split(".")
    obj: Any = module
    for part in parts[:-1]:
        obj = getattr(obj, part)
    raw = obj.__dict__.get(parts[-1]) if isinstance(obj, type) else getattr(obj, parts[-1], None)
    todo, seen = [raw], set()
    while todo:
        cand = todo.pop()
        if cand is None or id(cand) in seen:
            continue
        seen.add(id(cand))
        code = getattr(cand, "__code__", None)
        if (
            isinstance(cand, types.FunctionType)
            and code is not None
            and code.co_qualname == qualname
            and code.co_firstlineno == firstlineno
        ):
            return cand
        for attr in ("__wrapped__", "__func__", "fget", "fset", "fdel", "func", "run"):
            todo.append(getattr(cand, attr, None))
    return None


def install_mutant(module: types.ModuleType, tree: ast.Module, mutant: Mutant) -> None:
    """Change `tree` (a copy owned by this process) at the mutant's place, compile it, and put the
    changed function's code object into the live function. Raises RuntimeError when it cannot."""
    fn_line = _function_line(tree, mutant.qualname)
    live = _live_function(module, mutant.qualname, fn_line)
    if live is None:
        raise RuntimeError(f"no live function {mutant.qualname} (line {fn_line})")
    mutant.apply()
    ast.fix_missing_locations(tree)
    code = compile(tree, module.__file__ or "<module>", "exec", dont_inherit=True)
    new = _find_code(code, mutant.qualname, fn_line)
    if new is None:
        raise RuntimeError(f"no code object {mutant.qualname} in the mutated module")
    try:
        live.__code__ = new
    except ValueError as exc:  # free variables differ
        raise RuntimeError(f"cannot swap the code of {mutant.qualname}: {exc}") from exc
    # What the module cached with the original code (e.g. a @cache registry filled when Django
    # started) is computed again, by the mutant, as in a process that had it from the start.
    for value in list(vars(module).values()):
        clear = getattr(value, "cache_clear", None)
        if callable(clear):
            clear()


def _function_line(tree: ast.Module, qualname: str) -> int:
    for name, fn in _functions(tree):
        if name == qualname:
            return fn.decorator_list[0].lineno if fn.decorator_list else fn.lineno
    raise RuntimeError(f"no function {qualname}")


def _module_name(path: Path, root: Path) -> str | None:
    """The dotted name pytest's default import mode gives a file inside packages."""
    parts = [path.stem]
    folder = path.parent
    while (folder / "__init__.py").exists():
        parts.insert(0, folder.name)
        folder = folder.parent
    return ".".join(parts) if folder == root else None


def preimport(tests: list[str], root: Path) -> None:
    """What each child's pytest.main would import again and again, imported once in the parent
    before forking: the plugins, the conftest files and the test modules (the children run with
    --assert=plain, so nothing needs pytest's import hook). What fails here is left to pytest."""
    import importlib
    from importlib.metadata import entry_points

    import pytest  # noqa: F401

    for ep in entry_points(group="pytest11"):
        try:
            ep.load()
        except Exception:  # noqa: S112
            continue
    files: list[Path] = []
    for test in tests:
        path = (root / test.split("::")[0]).resolve()
        found = sorted(path.rglob("test_*.py")) if path.is_dir() else [path]
        for file in found:
            folder = file.parent
            while folder != root and root in folder.parents:
                files.append(folder / "conftest.py")
                folder = folder.parent
            files.append(file)
    files.insert(0, root / "conftest.py")
    for file in sorted(set(files), key=lambda f: (len(f.parts), str(f))):
        name = _module_name(file, root) if file.exists() else None
        if name is None:
            continue
        try:
            importlib.import_module(name)
        except Exception:  # noqa: S112
            continue


def _pytest_args(tests: list[str]) -> list[str]:
    return [
        *tests,
        "-x",
        "-q",
        "--no-header",
        "-p",
        "no:cacheprovider",
        "--reuse-db",
        "-o",
        "addopts=",
        "--assert=plain",
    ]


class _Db:
    """Per-job test databases: the baseline's, then one copy per further job."""

    def __init__(self) -> None:
        from django.conf import settings

        self.settings = settings.DATABASES["default"]
        self.base_test_name = self.settings.get("TEST", {}).get("NAME") or (
            "test_" + self.settings["NAME"]
        )

    def name(self, slot: int) -> str:
        return self.base_test_name if slot == 0 else f"{self.base_test_name}_job{slot}"

    def use(self, slot: int, fast: bool) -> None:
        """In a child: run on the slot's database; `fast`: it exists and is migrated already, so
        pytest-django's setup only points the connection at it."""
        self.settings.setdefault("TEST", {})["NAME"] = self.name(slot)
        if not fast:
            return
        import django.test.utils
        from django.db import connections

        name = self.name(slot)

        def setup_databases(*args: Any, **kwargs: Any) -> list[Any]:
            from django.conf import settings

            for alias in connections:
                connections[alias].close()
                settings.DATABASES[alias]["NAME"] = name
                connections[alias].settings_dict["NAME"] = name
            return []

        django.test.utils.setup_databases = setup_databases

    def _admin(self) -> Any:
        import psycopg

        s = self.settings
        return psycopg.connect(
            host=s.get("HOST") or "127.0.0.1",
            port=s.get("PORT") or 5432,
            user=s.get("USER") or None,
            password=s.get("PASSWORD") or None,
            dbname="postgres",
            autocommit=True,
        )

    def clone(self, jobs: int) -> bool:
        """Copies of the baseline's database for jobs 1..jobs-1; False when there is none (the
        tests use no database)."""
        with self._admin() as conn:
            template = self.name(0)
            exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [template])
            if exists.fetchone() is None:
                return False
            for slot in range(1, jobs):
                name = self.name(slot)
                conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
                conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
        return True


@dataclass
class Outcome:
    mutant: Mutant
    status: str  # killed, survived, timeout, error, equivalent
    seconds: float = 0.0


def _child(
    run: Callable[[], int], log: str, setup: Callable[[], None] | None = None
) -> None:  # pragma: no cover - runs in the fork
    code = 70
    try:
        os.setpgid(0, 0)
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.environ["CACHE_KEY_PREFIX"] = f"vouch-mutate:{os.getpid()}"
        if "django.conf" in sys.modules:
            from django.conf import settings

            if settings.configured:
                for cache in settings.CACHES.values():
                    cache["KEY_PREFIX"] = os.environ["CACHE_KEY_PREFIX"]
        if setup is not None:
            try:
                setup()
            except Exception as exc:
                print(f"mutate: cannot install the mutant: {exc!r}", flush=True)
                os._exit(ERROR_EXIT)
        code = run()
    except BaseException as exc:
        print(f"mutate: child failed: {exc!r}", flush=True)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(int(code))


def _pytest(tests: list[str]) -> Callable[[], int]:
    def run() -> int:
        import pytest

        return int(pytest.main(_pytest_args(tests)))

    return run


def _close_connections() -> None:
    try:
        from django.db import connections

        connections.close_all()
    except Exception:  # noqa: S110
        pass


def baseline(cfg: ModuleConfig, db: _Db | None, logdir: Path) -> float:
    """Runs the module's tests once, unchanged; returns the seconds taken. Exits 2 if they fail."""
    log = str(logdir / f"{cfg.module}.baseline.log")
    _close_connections()
    started = time.monotonic()
    pid = os.fork()
    if pid == 0:  # pragma: no cover
        _child(_pytest(cfg.tests), log, (lambda: db.use(0, fast=False)) if db else None)
    _, status = os.waitpid(pid, 0)
    took = time.monotonic() - started
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        tail = Path(log).read_text(errors="replace").splitlines()[-30:]
        print("\n".join(tail), file=sys.stderr)
        raise SystemExit(
            f"mutate: the tests of {cfg.module} fail without any mutant (pytest exit {code}); "
            f"fix them or `tests` in {cfg.path} first. Log: {log}"
        )
    return took


def run_mutants(
    module: types.ModuleType,
    tree: ast.Module,
    mutants: list[Mutant],
    tests: list[str],
    *,
    jobs: int,
    timeout: float,
    db: _Db | None,
    logdir: Path,
    progress: Callable[[int, dict[str, int]], None] | None = None,
    keep_logs: bool = False,
) -> list[Outcome]:
    """Each mutant in a forked child (at most `jobs` at once); killed, survived, timeout, error."""
    queue = list(enumerate(mutants))
    running: dict[int, tuple[int, Mutant, float, int]] = {}  # pid -> (index, mutant, start, slot)
    free_slots = list(range(jobs))
    results: dict[int, Outcome] = {}
    counts = {"killed": 0, "survived": 0, "timeout": 0, "error": 0}
    _close_connections()
    try:
        while queue or running:
            while queue and free_slots:
                index, mutant = queue.pop(0)
                slot = free_slots.pop(0)
                log = str(logdir / f"mutant-{index}.log")

                def setup(m: Mutant = mutant, s: int = slot) -> None:
                    if db is not None:
                        db.use(s, fast=True)
                    install_mutant(module, tree, m)

                pid = os.fork()
                if pid == 0:  # pragma: no cover
                    _child(_pytest(tests), log, setup)
                running[pid] = (index, mutant, time.monotonic(), slot)
            pid, status = os.waitpid(-1, os.WNOHANG)
            now = time.monotonic()
            if pid == 0:
                for child, (_, _, started, _) in list(running.items()):
                    if now - started > timeout:
                        with contextlib.suppress(ProcessLookupError):
                            os.killpg(child, signal.SIGKILL)
                time.sleep(0.01)
                continue
            if pid not in running:
                continue
            index, mutant, started, slot = running.pop(pid)
            free_slots.append(slot)
            code = os.waitstatus_to_exitcode(status)
            took = now - started
            if code == 0:
                outcome = "survived"
            elif code == ERROR_EXIT or code in (4, 5):  # could not install; pytest usage; no tests
                outcome = "error"
            elif code == -signal.SIGKILL and took > timeout:
                outcome = "timeout"
            else:
                outcome = "killed"
            if outcome in {"killed", "timeout"} and not keep_logs:
                with contextlib.suppress(OSError):
                    os.unlink(logdir / f"mutant-{index}.log")
            with contextlib.suppress(ProcessLookupError, PermissionError):  # what the child left
                os.killpg(pid, signal.SIGKILL)
            results[index] = Outcome(mutant, outcome, took)
            counts[outcome] += 1
            if progress is not None:
                progress(len(results), counts)
    finally:  # interrupted: no child outlives the run
        for child in running:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(child, signal.SIGKILL)
    return [results[i] for i in range(len(mutants))]


# --- reporting ----------------------------------------------------------------------------------


@dataclass
class ModuleResult:
    cfg: ModuleConfig
    outcomes: list[Outcome]
    stale: list[str]
    seconds: float
    mutant_seconds: float = 0.0  # the mutants' part (without imports and the baseline)

    def count(self, status: str) -> int:
        return sum(1 for o in self.outcomes if o.status == status)

    @property
    def killed(self) -> int:
        return self.count("killed") + self.count("timeout")

    @property
    def score(self) -> float:
        scored = len(self.outcomes) - self.count("equivalent")
        return 100.0 * self.killed / scored if scored else 100.0

    def survivors(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.status == "survived"]


def _where(cfg: ModuleConfig, m: Mutant) -> str:
    return f"{cfg.source.relative_to(cfg.root)}:{m.line}"


def print_module(result: ModuleResult) -> None:
    r = result
    print(
        f"  {r.cfg.module}: {len(r.outcomes)} mutants, {r.killed} killed "
        f"({r.count('timeout')} by timeout), {r.count('survived')} survived, "
        f"{r.count('equivalent')} equivalent, {r.count('error')} errors: "
        f"score {r.score:.1f}% ({r.seconds:.0f} s)"
    )
    for o in r.outcomes:
        if o.status in {"survived", "error"}:
            tag = "" if o.status == "survived" else "ERROR "
            print(
                f"    {tag}{_where(r.cfg, o.mutant)}  {o.mutant.id}  "
                f"{o.mutant.original} -> {o.mutant.mutant}"
            )
    for stale in r.stale:
        print(f"    warning: [[equivalent]] {stale!r} matches no mutant (stale?)")


def markdown(results: list[ModuleResult], fail_under: float) -> str:
    lines = [
        f"Last run: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
        f"`bench/mutate.py` (score = killed / (mutants - equivalent); the bar is {fail_under:g}%).",
        "",
        "| module | mutants | killed | survived | equivalent | errors | score |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        lines.append(
            f"| `{r.cfg.module}` | {len(r.outcomes)} | {r.killed} | {r.count('survived')} | "
            f"{r.count('equivalent')} | {r.count('error')} | {r.score:.1f}% |"
        )
    lines += ["", "Equivalent mutants (set aside):", ""]
    any_eq = False
    for r in results:
        for o in r.outcomes:
            if o.status == "equivalent":
                any_eq = True
                reason = r.cfg.equivalent[o.mutant.id]
                lines.append(f"- `{_where(r.cfg, o.mutant)}` `{o.mutant.id}`: {reason}")
    if not any_eq:
        lines.append("- none")
    lines += ["", "Survivors:", ""]
    any_s = False
    for r in results:
        for o in r.outcomes:
            if o.status in {"survived", "error"}:
                any_s = True
                tag = "" if o.status == "survived" else " (error: could not be put in place)"
                lines.append(f"- `{_where(r.cfg, o.mutant)}` `{o.mutant.id}`{tag}")
    if not any_s:
        lines.append("- none")
    return "\n".join(lines) + "\n"


def write_report(path: Path, body: str) -> None:
    """Replaces the text between the report markers in `path` (appends them if absent), so the
    file's own prose stays."""
    block = f"{REPORT_START}\n{body}{REPORT_END}\n"
    text = path.read_text() if path.exists() else ""
    if REPORT_START in text and REPORT_END in text:
        head, rest = text.split(REPORT_START, 1)
        _, tail = rest.split(REPORT_END, 1)
        text = head + block + tail.lstrip("\n")
    else:
        text = (text.rstrip("\n") + "\n\n" if text else "") + block
    path.write_text(text)


# --- command ------------------------------------------------------------------------------------


def _progress_printer(module: str, total: int) -> Callable[[int, dict[str, int]], None]:
    tty = sys.stdout.isatty()
    last = [time.monotonic()]

    def show(done: int, counts: dict[str, int]) -> None:
        line = (
            f"    {module}: {done}/{total}  killed {counts['killed'] + counts['timeout']}  "
            f"survived {counts['survived']}  errors {counts['error']}"
        )
        if tty:
            print("\r" + line, end="\n" if done == total else "", flush=True)
        elif done == total or time.monotonic() - last[0] > 15:
            last[0] = time.monotonic()
            print(line, flush=True)

    return show


def run_module(
    cfg: ModuleConfig,
    *,
    jobs: int,
    logdir: Path,
    use_db: bool = True,
    only: list[str] | None = None,
    keep_logs: bool = False,
) -> ModuleResult:
    import importlib

    started = time.monotonic()
    module = importlib.import_module(cfg.module)
    tree = ast.parse(cfg.source.read_text(), filename=str(cfg.source))
    mutants = find_mutants(tree, cfg.functions)
    ids = {m.id for m in mutants}
    stale = [i for i in cfg.equivalent if i not in ids]
    to_run = [m for m in mutants if m.id not in cfg.equivalent]
    if only:
        mutants = [m for m in mutants if m.id in only]
        to_run = [m for m in to_run if m.id in only]
    db = _Db() if use_db else None
    preimport(cfg.tests, cfg.root)
    took = baseline(cfg, db, logdir)
    if db is not None and jobs > 1 and not db.clone(jobs):
        db = None
    timeout = max(10.0, 5 * took)
    print(
        f"  {cfg.module}: {len(mutants)} mutants ({len(mutants) - len(to_run)} equivalent), "
        f"baseline {took:.1f} s, timeout {timeout:.0f} s",
        flush=True,
    )
    mutants_started = time.monotonic()
    ran = run_mutants(
        module,
        tree,
        to_run,
        cfg.tests,
        jobs=jobs,
        timeout=timeout,
        db=db,
        logdir=logdir,
        progress=_progress_printer(cfg.module, len(to_run)),
        keep_logs=keep_logs,
    )
    by_id = {o.mutant.id: o for o in ran}
    outcomes = [by_id.get(m.id) or Outcome(m, "equivalent") for m in mutants]
    return ModuleResult(
        cfg, outcomes, stale, time.monotonic() - started, time.monotonic() - mutants_started
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--module", action="append", help="dotted module (repeatable; default all)")
    parser.add_argument("--list", action="store_true", help="list the mutants, run nothing")
    parser.add_argument("--jobs", type=int, default=2, help="mutants run at once (default 2)")
    parser.add_argument("--report", type=Path, help="write the markdown report into this file")
    parser.add_argument("--fail-under", type=float, default=95.0, help="score bar (default 95)")
    parser.add_argument("--config-dir", type=Path, default=CONFIG_DIR, help=argparse.SUPPRESS)
    parser.add_argument("--root", type=Path, default=REPO, help=argparse.SUPPRESS)
    parser.add_argument(
        "--keep-logs", action="store_true", help="keep every mutant's pytest log (mutant-<n>.log)"
    )
    parser.add_argument(
        "--mutant", action="append", metavar="ID", help="run only this mutant (repeatable)"
    )
    args = parser.parse_args(argv)

    root = args.root.resolve()
    configs = all_configs(args.config_dir, root)
    names = args.module or list(configs)
    unknown = [n for n in names if n not in configs]
    if unknown:
        print(f"mutate: no config for {unknown} in {args.config_dir}", file=sys.stderr)
        return 2
    if args.mutant:  # only the modules that have one of them
        wanted = set(args.mutant)
        names = [
            n
            for n, cfg in ((n, configs[n]) for n in names)
            if any(
                m.id in wanted
                for m in find_mutants(ast.parse(cfg.source.read_text()), cfg.functions)
            )
        ]
        if not names:
            print(f"mutate: no module has a mutant {sorted(wanted)}", file=sys.stderr)
            return 2
    if args.list:
        for name in names:
            cfg = configs[name]
            tree = ast.parse(cfg.source.read_text())
            mutants = find_mutants(tree, cfg.functions)
            print(f"{name}: {len(mutants)} mutants")
            for m in mutants:
                eq = "  [equivalent]" if m.id in cfg.equivalent else ""
                print(f"  {_where(cfg, m)}  {m.id}{eq}")
        return 0

    _setup_environment(root)
    use_db = _django_setup()
    import tempfile

    logdir = Path(tempfile.mkdtemp(prefix="vouch-mutate-"))
    print(
        f"mutate: {len(names)} module(s), {args.jobs} job(s), "
        f"database {os.environ.get('DATABASE_URL')}, logs {logdir}",
        flush=True,
    )
    results = []
    for name in names:
        result = run_module(
            configs[name],
            jobs=max(1, args.jobs),
            logdir=logdir,
            use_db=use_db,
            only=args.mutant,
            keep_logs=args.keep_logs,
        )
        print_module(result)
        results.append(result)
    print("\nmodule                              mutants  killed  survived  equiv  errors   score")
    for r in results:
        print(
            f"{r.cfg.module:<35} {len(r.outcomes):>7} {r.killed:>7} {r.count('survived'):>9} "
            f"{r.count('equivalent'):>6} {r.count('error'):>7} {r.score:>6.1f}%"
        )
    total_run = sum(len(r.outcomes) - r.count("equivalent") for r in results)
    total_s = sum(r.seconds for r in results)
    mutant_s = sum(r.mutant_seconds for r in results)
    if total_run:
        print(
            f"{total_run} mutants in {total_s:.0f} s; the mutants' part {mutant_s:.0f} s "
            f"({mutant_s / total_run:.2f} s per mutant with {args.jobs} job(s))"
        )
    if args.report:
        write_report(args.report, markdown(results, args.fail_under))
        print(f"report: {args.report}")
    if not args.keep_logs:
        import shutil

        shutil.rmtree(logdir, ignore_errors=True)
    below = [r.cfg.module for r in results if r.score < args.fail_under]
    if below:
        print(f"under {args.fail_under:g}%: {', '.join(below)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
