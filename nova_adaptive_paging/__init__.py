"""nova-adaptive-paging: adaptive EPT/NPT <-> shadow paging for Nova/KVM."""

import logging

# A library logs; the program that uses it (the agent with oslo.log, the
# CLI with its one-line errors) decides where records go.
logging.getLogger(__name__).addHandler(logging.NullHandler())
