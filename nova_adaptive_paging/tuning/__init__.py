"""Thresholds from costs: the derivation (:mod:`.derivation`), the fit
from calibration runs (:mod:`.cost_fit`), the profiler and the advisory
mode's modeled gain, all through this one code."""
