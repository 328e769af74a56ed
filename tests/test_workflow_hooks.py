"""The Snakefile's hooks (aam.workflow.hooks): onstart takes the work directory's lock and turns
another Snakemake's hold into one WorkflowError line; onsuccess and onerror release it, onerror
prints each failed job's error line (tests/faults/test_run_lock.py runs them in a real
Snakemake)."""

from types import SimpleNamespace

import pytest
from snakemake.exceptions import WorkflowError
from test_failures import _snakemake_log

from aam.runtime.run_lock import lock_directories
from aam.workflow.hooks import on_end, on_start
from aam.workflow.launch import Layout


def snakemake_workflow(lock: bool = True) -> SimpleNamespace:
    """The parts of Snakemake's ``workflow`` object the hooks read."""
    return SimpleNamespace(
        execution_settings=SimpleNamespace(lock=lock),
        resource_settings=SimpleNamespace(overwrite_resources={}, default_resources=None),
        executor_plugin=SimpleNamespace(name="local"),
    )


def test_onstart_locks_the_work_directory_until_the_end(tmp_path):
    work = tmp_path / "work"
    on_start(snakemake_workflow(), work, Layout())
    try:
        assert (work / ".aam.lock").is_file()
        with pytest.raises(Exception, match="another snakemake"):
            lock_directories([work], "snakemake", "running this workflow")
    finally:
        on_end()
    assert not (work / ".aam.lock").exists()
    on_start(snakemake_workflow(lock=False), work, Layout())  # --nolock: no lock taken
    assert not (work / ".aam.lock").exists()


def test_onstart_refuses_a_work_directory_another_snakemake_holds(tmp_path):
    other = lock_directories([tmp_path], "snakemake", "running this workflow")
    try:
        with pytest.raises(WorkflowError, match=r"another snakemake \(pid \d+") as refused:
            on_start(snakemake_workflow(), tmp_path, Layout())
        assert "\n" not in str(refused.value)
    finally:
        other.release()


def test_onerror_prints_each_failed_jobs_error_line(tmp_path, capsys):
    job_log = tmp_path / "split.log"
    job_log.write_text("aam split: error: metadata.tsv: no column 'agee'\n")
    on_end(_snakemake_log(tmp_path, {"split": job_log}))
    assert (
        capsys.readouterr().err == "rule split: aam split: error: metadata.tsv: no column 'agee'\n"
    )
    on_end()  # a success prints nothing
    assert capsys.readouterr().err == ""
