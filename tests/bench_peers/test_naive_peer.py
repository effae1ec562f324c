"""bench/refund_api.py --against naive, at a tiny size: both servers answer every refund, each
side's statements are counted, and the checks (Vouch's ledger, the peer's rows, the sandbox's
refund count against both sides' answers) pass."""

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_against_naive_measures_both_sides_and_checks_them() -> None:
    done = subprocess.run(
        [
            sys.executable, "bench/refund_api.py", "--against", "naive", "--seconds", "2",
            "--rounds", "2", "--clients", "2", "--baseline-seconds", "0",
        ],
        cwd=REPO, capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip
    out = done.stdout
    assert "naive refund (2 clients, 2 s):" in out, out + done.stderr
    # Both sides: refunds answered, none failed.
    assert re.search(r"^refund \(2 clients, 2 s\):\s+[1-9][\d.]* refunds/s", out, re.M), out
    assert re.search(r"^naive refund \(2 clients, 2 s\):\s+[1-9][\d.]* refunds/s", out, re.M), out
    assert len(re.findall(r"5xx / non-2xx / no answer:\s+0 / 0 / 0", out)) == 2, out
    # Statements counted in each side's workers: the peer makes exactly its four.
    sql = re.findall(r"SQL per ok request:\s+([\d.]+) statements", out)
    assert len(sql) == 2, out
    assert float(sql[0]) > 4, out
    assert sql[1] == "4.00", out
    assert re.search(r"^ratio Vouch / naive refunds/s:\s+0\.\d+", out, re.M), out
    assert re.search(r"^ledger:\s+clean", out, re.M), out
    assert re.search(r"^naive peer's rows:\s+(\d+) refund rows = \1 answers 201", out, re.M), out
    sandbox = re.search(
        r"^sandbox:\s+(\d+) refunds = (\d+) answers 200 .* \+ the peer's (\d+) answers 201",
        out,
        re.M,
    )
    assert sandbox, out
    assert int(sandbox[1]) == int(sandbox[2]) + int(sandbox[3]), out
    # Only the targets this issue has yet to reach may be missed, never a check.
    missed = re.search(r"^MISSED: (.*)$", out, re.M)
    assert not missed or set(missed[1].split(", ")) <= {"throughput ratio", "refund app time"}
    assert done.returncode == (1 if missed else 0), out + done.stderr
