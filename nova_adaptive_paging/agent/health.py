"""What can go wrong in the agent: the ``kind`` label of
``agent_errors_total``, one name per source so an operator's alert can
tell a libvirt outage from a bad flavor."""

LIBVIRT = 'libvirt'
METADATA = 'metadata'
POLICY = 'policy'
VM = 'vm'
APPLY = 'apply'
THRESHOLDS = 'thresholds'
PROFILE = 'profile'
PLACEMENT = 'placement'
NOVA_API = 'nova-api'
FAULTS = 'guest-faults'
COUNTERS = 'counters'
# Anything else one guest's handling raised (the pass went on).
GUEST = 'guest'
# The host interface as a whole failed after start-up (its ABI file).
HOST = 'host'
INTERNAL = 'internal'
KINDS = (LIBVIRT, METADATA, POLICY, VM, APPLY, THRESHOLDS, PROFILE,
         PLACEMENT, NOVA_API, FAULTS, COUNTERS, GUEST, HOST, INTERNAL)
