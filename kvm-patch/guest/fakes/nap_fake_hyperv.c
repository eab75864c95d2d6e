// SPDX-License-Identifier: GPL-2.0-only
/*
 * A stand-in for the one thing the emulated hosts cannot be: a Hyper-V
 * guest.  Loaded before a KVM vendor module, it sets the nested features
 * Hyper-V advertises to a KVM host running under it, so that kvm_amd and
 * kvm_intel install Hyper-V's enlightened remote TLB flush
 * (hv_flush_remote_tlbs()) as they would on Azure or Hyper-V.  No
 * hypercall page exists, so no VM may run while it is loaded; guest/init
 * only reads what KVM then offers, and unloads it.
 */
#include <linux/module.h>
#include <asm/hyperv-tlfs.h>
#include <asm/mshyperv.h>

#define FAKE_FEATURES	(HV_X64_NESTED_ENLIGHTENED_TLB | \
			 HV_X64_NESTED_GUEST_MAPPING_FLUSH)

static u32 saved;

static int __init nap_fake_hyperv_init(void)
{
	saved = ms_hyperv.nested_features;
	ms_hyperv.nested_features |= FAKE_FEATURES;
	return 0;
}

static void __exit nap_fake_hyperv_exit(void)
{
	ms_hyperv.nested_features = saved;
}

module_init(nap_fake_hyperv_init);
module_exit(nap_fake_hyperv_exit);
MODULE_DESCRIPTION("Test stand-in for Hyper-V's nested features (nova-adaptive-paging)");
MODULE_LICENSE("GPL");
