"""Profiling of a training segment: one kernel-stats table (rocprofv3, rocprof v1 or
torch.profiler), a batch-size x attention-backend sweep (peak memory, samples/s), and an HTML
report that joins them with Snakemake ``benchmark:`` TSVs.

Modules: ``kernels`` (parsers, categories), ``probe`` (the measured training steps and the
rocprof command lines), ``report`` (HTML), ``dispatched`` (the aten ops a block of code
dispatches: its kernel launches on a GPU). The commands are `aam profile` and
`aam profiling-report` (``aam.commands.profile``, ``aam.commands.profiling_report``).
"""

KERNEL_COLUMNS = ("name", "calls", "total_ns", "mean_ns", "pct", "category")
KERNEL_FILE, MEMORY_FILE, THROUGHPUT_FILE = "kernel_stats.csv", "memory.json", "throughput.json"
