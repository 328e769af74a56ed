"""UniFrac distances: built-in kernels (CPU numba, GPU torch), Striped UniFrac, scikit-bio."""
