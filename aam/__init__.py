"""AAM: Attention All Microbes, with an HPC training workflow."""

__version__ = "0.1.0"
