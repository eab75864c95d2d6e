"""The fleet strategy Watcher loads (entry points ``watcher_goals`` and
``watcher_strategies``): adaptive paging on stock kernels, by moving
guests between a hap and a shadow pool.  Thin: the decision is
:mod:`nova_adaptive_paging.pools.planner`, the figures come from the
agents through Prometheus (:mod:`nova_adaptive_paging.pools.figures`)."""
