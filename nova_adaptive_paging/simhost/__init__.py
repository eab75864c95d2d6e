"""The simulated KVM host: VMs replaying traces behind the switching
interface (FUSE), libvirt pid files and a libvirt test-driver node XML.

A test and demo fixture: production code never imports it.  Everything it
reports is modeled (:mod:`nova_adaptive_paging.costmodel`).
"""
