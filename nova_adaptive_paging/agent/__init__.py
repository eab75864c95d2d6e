"""The compute-node agent (doc/source/agent.rst).

One module per concern, in the order the data flows: ``domains`` finds
the guests (libvirt), ``guest`` reads each one's policy from Nova's
metadata, ``writer`` applies it through :mod:`nova_adaptive_paging.host`,
``thresholds`` pushes the host's calibrated profile, ``collector``
exports what the kernel reports, ``privileged`` holds the only code that
runs with privileges, and ``service`` is the loop around them.
"""
