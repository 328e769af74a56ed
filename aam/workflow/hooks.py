"""The Snakefile's onstart, onsuccess and onerror: one Snakemake at a time on a work directory,
a multi-node pretraining's partition checked before the first SLURM job, and each failed job's
error line on the terminal.

`snakemake --unlock` removes Snakemake's own locks (.snakemake/locks) without asking whether
their Snakemake still runs; the work directory's lock (``WORK/.aam.lock``,
``aam.runtime.run_lock``) is held by the running Snakemake process itself, so the OS frees it
when that process ends. It is taken when jobs start: not by --dry-run, --lint or --unlock (no
onstart), nor by the Snakemake inside a SLURM job (--no-hooks); --nolock skips it with
Snakemake's own.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from snakemake.exceptions import WorkflowError

from aam.errors import InputError
from aam.runtime.run_lock import lock_workflow, unlock_workflow
from aam.workflow.failures import error_lines
from aam.workflow.launch import Layout, check_pretrain_partition


def on_start(workflow: Any, work: Path, layout: Layout) -> None:
    """Take ``work``'s lock (unless --nolock), then check the pretraining ``layout``'s
    partition (SLURM only); WorkflowError (one line) if another Snakemake holds the lock or the
    partition is too small."""
    settings = workflow.resource_settings
    try:
        if workflow.execution_settings.lock:
            lock_workflow(work)
        check_pretrain_partition(
            layout,
            workflow.executor_plugin.name,
            settings.overwrite_resources,
            settings.default_resources,
        )
    except (InputError, ValueError) as err:
        raise WorkflowError(str(err)) from None


def on_end(snakemake_log: Iterable[str | Path] | str | Path | None = None) -> None:
    """Release the lock; after a failure (``snakemake_log`` given), print each failed job's
    error line (``aam.workflow.failures``) to stderr."""
    unlock_workflow()
    for line in error_lines(snakemake_log) if snakemake_log else []:
        print(line, file=sys.stderr)
