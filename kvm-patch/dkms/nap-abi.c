// SPDX-License-Identifier: GPL-2.0
/*
 * Layouts of KVM structures that code built into the Debian 6.12 kernel
 * image dereferences.  Never linked: arch/x86/kvm/Kbuild compiles it to
 * assembly twice, with the pristine and with the patched headers, and
 * refuses to build the modules if the two differ.
 *
 * Found by listing the x86 files outside arch/x86/kvm and virt/kvm that
 * include a KVM header and are built in with Debian's configuration:
 *   kernel/entry/kvm.c             kvm_handle_signal_exit()
 *   arch/x86/events/intel/core.c   intel_guest_get_msrs()
 */
#include <linux/kbuild.h>
#include <linux/kvm_host.h>

void nap_abi(void);

void nap_abi(void)
{
	OFFSET(KVM_VCPU_run, kvm_vcpu, run);
	OFFSET(KVM_VCPU_stat, kvm_vcpu, stat);
	OFFSET(KVM_VCPU_signal_exits, kvm_vcpu, stat.signal_exits);
	DEFINE(KVM_PMU_size, sizeof(struct kvm_pmu));
	OFFSET(KVM_PMU_pebs_enable, kvm_pmu, pebs_enable);
	OFFSET(KVM_PMU_host_cross_mapped_mask, kvm_pmu, host_cross_mapped_mask);
	OFFSET(KVM_PMU_ds_area, kvm_pmu, ds_area);
	OFFSET(KVM_PMU_pebs_data_cfg, kvm_pmu, pebs_data_cfg);
	DEFINE(KVM_RUN_exit_reason, offsetof(struct kvm_run, exit_reason));
}
