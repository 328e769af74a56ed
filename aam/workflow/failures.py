"""The line that names a failed job's problem, on the terminal: Snakemake reports a failed job
as ``Error in rule <rule>:`` with its ``log: <path> (check log file(s) for error details)``,
and the one line `aam` wrote (``aam <command>: error: ...``) stays in that file. The Snakefile's
``onerror`` hook prints it for every failed job (``error_lines``). Standard library only."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

_RULE = re.compile(r"^Error in rule (\S+):$")
_LOG = re.compile(r"^\s+log: (.+) \(check log file\(s\) for error details\)$")
_AAM_ERROR = re.compile(r"^aam [\w-]+: error: ")


def failed_job_logs(snakemake_log: str | Path) -> list[tuple[str, list[Path]]]:
    """(rule, its log files) of each failed job that a Snakemake log reports, in its order."""
    failed, rule = [], None
    for line in Path(snakemake_log).read_text(errors="replace").splitlines():
        if found := _RULE.match(line):
            rule = found[1]
        elif rule and (found := _LOG.match(line)):
            failed.append((rule, [Path(p) for p in found[1].split(", ")]))
            rule = None
    return failed


def error_lines(snakemake_logs: Iterable[str | Path] | str | Path) -> list[str]:
    """``rule <rule>: <line>`` for each failed job of the Snakemake logs (one path or several):
    the last ``aam ...: error:`` line of its log, else its log's last line (a failure outside
    `aam`)."""
    if isinstance(snakemake_logs, str | Path):
        snakemake_logs = [snakemake_logs]
    lines = []
    for snakemake_log in snakemake_logs:
        if not Path(snakemake_log).is_file():
            continue
        for rule, paths in failed_job_logs(snakemake_log):
            for path in paths:
                text = path.read_text(errors="replace").splitlines() if path.is_file() else []
                text = [t for t in text if t.strip()]
                errors = [t for t in text if _AAM_ERROR.match(t)]
                if errors or text:
                    lines.append(f"rule {rule}: {(errors or text)[-1]}")
    return lines
