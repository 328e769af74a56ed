"""The device names (and compile modes) the commands take, declared once: argparse
(``option(pattern=...)``), the workflow's config schema (generated from the flags) and
``resolve_device`` check them with these (regular expression a name matches whole, the names in
words). And whether a GPU is here."""

from __future__ import annotations

# training, prediction, validation and profiling (ROCm's GPUs are `cuda` in torch too)
TORCH_DEVICE = (r"auto|cpu|cuda(:\d+)?", "auto, cpu, cuda or cuda:N")
# the UniFrac matrix kernels (rule unifrac): a device, no `auto`
KERNEL_DEVICE = (r"cpu|cuda(:\d+)?", "cpu, cuda or cuda:N")
# --compile of the training commands: what torch.compile covers (``aam.training.compiling``)
COMPILE_MODES = ("auto", "model", "layers", "off")


def no_gpu_line(device: str = "cuda") -> str | None:
    """None when torch is here and sees a GPU (or ``device`` is cpu), else the one line
    `make gpu-check` stops with (standard library and torch only: it runs with a GPU node's
    python before anything else is installed)."""
    try:
        import torch
    except ImportError as err:
        return f"no torch: {err}; run with a python that has a CUDA or ROCm torch (GPU_PYTHON)"
    if device == "cpu" or torch.cuda.is_available():
        return None
    return (
        f"no GPU: torch.cuda.is_available() is False (torch {torch.__version__}, CUDA "
        f"{torch.version.cuda}, HIP {torch.version.hip}); run on a GPU node, or "
        "GPU_CHECK_DEVICE=cpu for a dry run of the plumbing"
    )
