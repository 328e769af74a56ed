"""Input data: BIOM tables, sample metadata, rarefaction, sample-ID matching, tokenization.

Import from the submodules (``aam.data.table``, ``aam.data.metadata``, ...): this package
imports none of them, so `aam unifrac` does not pay for pandas or biom.
"""
