"""The paging cost model: hardware cost profiles, traces, the evaluator.

Everything in this package is a *model*: execution times it prints are
computed from per-event costs, never measured.  See
doc/source/simulation.rst.
"""

import importlib.resources

MODELED_NOTE = ('modeled: times come from the cost model in '
                'nova_adaptive_paging.costmodel, not from a measurement')


def data_dir(kind):
    """A directory of shipped data ('traces' or 'hardware')."""
    root = importlib.resources.files(__name__)
    return root / 'data' / kind


def data_files(kind, suffix):
    """Shipped data files of one kind, sorted by name."""
    return sorted((p for p in data_dir(kind).iterdir()
                   if p.name.endswith(suffix)), key=lambda p: p.name)
