"""The compute-node agent (doc/source/agent.rst).

One module per concern, in the order the data flows: ``domains`` finds
the guests (libvirt, each call under a deadline: ``call_thread``),
``guest`` reads each one's policy from Nova's metadata, ``writer``
applies it through :mod:`nova_adaptive_paging.host`, ``thresholds``
pushes the host's calibrated profile (its files read as untrusted input
by ``profile_files``), ``reconcile`` and ``sampler`` are the two passes,
each taking the narrow pieces of ``host_state`` and ``health``, ``web``
serves what the telemetry collector snapshots, ``host_lock`` keeps one
agent per host, and ``service`` is the loop around them.
"""
