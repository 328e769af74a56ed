"""The suite's Hypothesis profiles (loaded by conftest.py before any test module).

Hypothesis writes nothing into the checkout (no .hypothesis/): no example database (failing
examples are printed with their reproduction blob). Outside CI every run draws new examples
(profile "aam": exploring); with CI=true (CI sets it, and .ci/run) the examples are
derandomized (profile "ci"): the same commit runs the same examples, so a run fails only for a
change, never for a newly drawn case. Hypothesis itself loads its own "ci" profile whenever a
CI variable exists at all (even CI=""), so both are declared from its "default", whatever the
environment.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "aam", parent=settings.get_profile("default"), database=None, print_blob=True
)
settings.register_profile(
    "ci",
    parent=settings.get_profile("aam"),
    derandomize=True,
    deadline=None,  # no timing in a CI verdict: a loaded machine is not a failure
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("ci" if os.environ.get("CI", "").lower() in ("true", "1") else "aam")
