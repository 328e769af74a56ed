"""A failed job's one line on the terminal (issue 61, item 6): the Snakefile's onerror hook
prints, for each job a Snakemake log reports failed, the `aam ...: error:` line of its log
(test_workflow_edges.py sees it on a real run's stderr)."""

from aam.workflow.failures import error_lines, failed_job_logs


def _snakemake_log(tmp_path, jobs: dict[str, str]) -> str:
    blocks = []
    for rule, log in jobs.items():
        blocks += [
            f"Error in rule {rule}:",
            "    message: None",
            "    jobid: 1",
            f"    log: {log} (check log file(s) for error details)",
            "    shell:",
            "        python -m aam ...",
        ]
    path = tmp_path / "run.snakemake.log"
    path.write_text("\n".join(["Building DAG of jobs...", *blocks, "Shutting down"]) + "\n")
    return str(path)


def test_each_failed_job_gives_its_aam_error_line_or_its_last_line(tmp_path):
    check = tmp_path / "check.log"
    check.write_text("aam check-data: staged\naam check-data: error: m.tsv: no column 'agee'\n")
    crash = tmp_path / "crash.log"
    crash.write_text("Traceback (most recent call last):\n  ...\nMemoryError\n\n")
    log = _snakemake_log(
        tmp_path, {"check_data": check, "finetune": crash, "predict": tmp_path / "absent.log"}
    )
    assert [rule for rule, _ in failed_job_logs(log)] == ["check_data", "finetune", "predict"]
    assert error_lines([log, tmp_path / "no such log"]) == [
        "rule check_data: aam check-data: error: m.tsv: no column 'agee'",
        "rule finetune: MemoryError",
    ]


def test_a_run_without_failed_jobs_prints_nothing(tmp_path):
    assert error_lines([_snakemake_log(tmp_path, {})]) == []


def test_one_log_path_is_read_as_one_log(tmp_path):
    check = tmp_path / "check.log"
    check.write_text("aam split: error: no column 'x'\n")
    log = _snakemake_log(tmp_path, {"split": check})
    assert error_lines(log) == error_lines([log]) == ["rule split: aam split: error: no column 'x'"]
