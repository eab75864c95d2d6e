"""The stock-kernel fleet's decision: which adaptive guest moves to the
hap or the shadow pool, and where (:mod:`.planner`), from the agents'
modeled figures read from Prometheus (:mod:`.figures`).  The Watcher
strategy and the simulated day call it."""
