"""nova-adaptive-paging: adaptive EPT/NPT <-> shadow paging for Nova/KVM."""
