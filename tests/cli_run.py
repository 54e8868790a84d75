"""Running the ``dse`` command line in-process, for the command tests (test_cli_model.py, test_calibrate.py,
test_evaluate_table.py)."""

from __future__ import annotations

from dse.cli import main


def run_cli(capsys, *argv) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of ``dse ARGV`` (each argument str()-ed: a path may be given as it is)."""
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err
