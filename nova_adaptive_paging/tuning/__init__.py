"""Thresholds from costs: ``calibrate``, and later the profiler and the
advisory mode's modeled gain, all through this one code."""
