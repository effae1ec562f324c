"""Every bench takes its database name, its Redis database and its ports from flags or the
environment (bench/README.md, "Running two benches side by side"), so that two runs on one machine
never share a database, a broker or a port; with neither, each keeps its former defaults."""

import argparse
import importlib
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Bench:
    name: str
    database: str | None  # the default of --database-name ('' : a name with the pid); None: none
    redis: str | None  # the default of --redis-url ('' : CELERY_BROKER_URL as set); None: none
    ports: tuple[str, ...]  # the port flags, each 0 (a free port) by default
    database_dest: str = "database_name"


BENCHES = [
    Bench("reconciliation", "", "redis://127.0.0.1:6379/7", ("--sandbox-port",)),
    Bench(
        "refund_api",
        "",
        "redis://127.0.0.1:6379/7",
        ("--sandbox-port", "--web-port", "--naive-port"),
    ),
    Bench("verification", "", "", ("--sandbox-port",)),
    Bench("search", "vouch_bench_search", "", (), database_dest="database"),
    Bench("sandbox", None, None, ("--sandbox-port", "--localstripe-port")),
    Bench("mcp_vs_rest", "", "redis://127.0.0.1:6379/9", ("--sandbox-port", "--web-port")),
    Bench("metrics_scrape", "", "", ()),
]
IDS = [bench.name for bench in BENCHES]


def port_env(flag: str) -> str:
    return "BENCH_" + flag.lstrip("-").replace("-", "_").upper()


def flags(bench: Bench) -> list[str]:
    return [
        *(["--database-name"] if bench.database is not None else []),
        *(["--redis-url"] if bench.redis is not None else []),
        *bench.ports,
    ]


def env_names(bench: Bench) -> list[str]:
    return [
        *(["BENCH_DATABASE_NAME"] if bench.database is not None else []),
        *(["BENCH_REDIS_URL"] if bench.redis is not None else []),
        *(port_env(flag) for flag in bench.ports),
    ]


def argv(bench: Bench, run: int) -> list[str]:
    """Run `run`'s own names: a database, a Redis database and ports of its own."""
    found: list[str] = []
    if bench.database is not None:
        found += ["--database-name", f"vouch_h2_bench_{run}"]
    if bench.redis is not None:
        found += ["--redis-url", f"redis://127.0.0.1:6379/{10 + run}"]
    for number, flag in enumerate(bench.ports):
        found += [flag, str(20_000 + 100 * run + number)]
    return found


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in list(os.environ):
        if name.startswith("BENCH_"):
            monkeypatch.delenv(name)
    return monkeypatch


def parser_of(bench: Bench) -> argparse.ArgumentParser:
    parser = importlib.import_module(f"bench.{bench.name}").build_parser()
    assert isinstance(parser, argparse.ArgumentParser)
    return parser


def chosen(bench: Bench, args: argparse.Namespace) -> dict[str, object]:
    """What a parse chose for the database, the broker and the ports."""
    found: dict[str, object] = {}
    if bench.database is not None:
        found["database"] = getattr(args, bench.database_dest)
    if bench.redis is not None:
        found["redis"] = args.redis_url
    for flag in bench.ports:
        found[flag] = getattr(args, flag.lstrip("-").replace("-", "_"))
    return found


@pytest.mark.parametrize("bench", BENCHES, ids=IDS)
def test_help_lists_the_flags_and_their_environment_variables(bench: Bench) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BENCH_")}
    done = subprocess.run(
        [sys.executable, f"bench/{bench.name}.py", "--help"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    for name in [*flags(bench), *env_names(bench)]:
        assert name in done.stdout, f"{name} not in:\n{done.stdout}"


@pytest.mark.parametrize("bench", BENCHES, ids=IDS)
def test_without_flags_or_environment_the_defaults_are_the_former_ones(
    bench: Bench, clean_env: pytest.MonkeyPatch
) -> None:
    args = parser_of(bench).parse_args([])
    expected: dict[str, object] = {}
    if bench.database is not None:
        expected["database"] = bench.database
    if bench.redis is not None:
        expected["redis"] = bench.redis
    expected.update(dict.fromkeys(bench.ports, 0))  # 0: a free port, picked at start
    assert chosen(bench, args) == expected


@pytest.mark.parametrize("bench", BENCHES, ids=IDS)
def test_two_runs_configured_apart_share_no_database_broker_or_port(
    bench: Bench, clean_env: pytest.MonkeyPatch
) -> None:
    parser = parser_of(bench)
    first, second = (chosen(bench, parser.parse_args(argv(bench, run))) for run in (1, 2))
    assert first.keys() == second.keys()
    assert first
    for what in first:
        assert first[what] != second[what], what
    ports = [v for k, v in [*first.items(), *second.items()] if k.startswith("--")]
    assert len(set(ports)) == len(ports)
    if bench.database is not None:
        assert first["database"] == "vouch_h2_bench_1"
    if bench.redis is not None:
        assert first["redis"] == "redis://127.0.0.1:6379/11"


@pytest.mark.parametrize("bench", BENCHES, ids=IDS)
def test_the_environment_is_the_fallback_and_a_flag_wins_over_it(
    bench: Bench, clean_env: pytest.MonkeyPatch
) -> None:
    clean_env.setenv("BENCH_DATABASE_NAME", "vouch_h2_from_env")
    clean_env.setenv("BENCH_REDIS_URL", "redis://127.0.0.1:6379/12")
    for number, flag in enumerate(bench.ports):
        clean_env.setenv(port_env(flag), str(30_000 + number))
    from_env = chosen(bench, parser_of(bench).parse_args([]))
    expected: dict[str, object] = {}
    if bench.database is not None:
        expected["database"] = "vouch_h2_from_env"
    if bench.redis is not None:
        expected["redis"] = "redis://127.0.0.1:6379/12"
    expected.update({flag: 30_000 + number for number, flag in enumerate(bench.ports)})
    assert from_env == expected
    # The parser reads the environment when it is built: a flag still wins.
    from_flags = chosen(bench, parser_of(bench).parse_args(argv(bench, 1)))
    assert all(from_flags[what] != from_env[what] for what in from_env)


@pytest.mark.parametrize("bench", [b for b in BENCHES if b.ports], ids=lambda b: b.name)
def test_a_port_out_of_range_is_refused(bench: Bench, clean_env: pytest.MonkeyPatch) -> None:
    with pytest.raises(SystemExit):
        parser_of(bench).parse_args([bench.ports[0], "70000"])
