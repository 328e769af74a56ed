"""The device names the commands take, declared once: argparse (``option(pattern=...)``), the
workflow's config schema (generated from the flags) and ``resolve_device`` check them with these
(regular expression a name matches whole, the names in words)."""

from __future__ import annotations

# training, prediction, validation and profiling (ROCm's GPUs are `cuda` in torch too)
TORCH_DEVICE = (r"auto|cpu|cuda(:\d+)?", "auto, cpu, cuda or cuda:N")
# the UniFrac matrix kernels (rule unifrac): a device, no `auto`
KERNEL_DEVICE = (r"cpu|cuda(:\d+)?", "cpu, cuda or cuda:N")
