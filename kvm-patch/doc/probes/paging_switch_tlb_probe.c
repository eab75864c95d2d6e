// SPDX-License-Identifier: GPL-2.0-only
/*
 * A probe of the emulator, not a test of KVM: does the CPU it emulates keep
 * a stale translation where real hardware may?  If it never does, a flush
 * that KVM forgets cannot show in any test run on it.
 *
 * 1. In the guest alone: it reads X, points X's PTE at another page
 *    without INVLPG and reads X again.  Hardware may return the old page.
 * 2. Across a VM exit and entry: the guest reads X, exits; the host points
 *    X's PTE at the other page; the guest reads X again.  With VPID (or an
 *    ASID) hardware may still return the old page; only an emulator that
 *    flushes on every VM entry or exit returns the new one.
 *
 * Run it with TDP (hap): with shadow paging the host's write to the guest
 * PTE is not seen by KVM's shadow pages, which would keep the old page
 * whatever the TLB does.
 */
#include <stdio.h>
#include <string.h>

#include "kvm_util.h"
#include "processor.h"
#include "test_util.h"

#define SLOT		10
#define GPA		0xc0000000ULL
#define X_GVA		0xd0000000ULL
#define PT_GVA		0xd0200000ULL
#define OLD		0x0123456789abcdefULL
#define NEW		0xfedcba9876543210ULL

static void guest_code(uint64_t pte_gva, uint64_t old_pa, uint64_t new_pa)
{
	volatile uint64_t *x = (volatile uint64_t *)X_GVA;
	volatile uint64_t *pte = (volatile uint64_t *)pte_gva;
	uint64_t seen, flushed;

	/* 1. In the guest alone. */
	GUEST_ASSERT_EQ(*x, OLD);
	*pte = (*pte & ~PHYSICAL_PAGE_MASK) | new_pa;
	seen = *x;
	asm volatile("invlpg (%0)" :: "r"(X_GVA) : "memory");
	flushed = *x;
	GUEST_ASSERT_EQ(flushed, NEW);
	GUEST_SYNC(seen);

	/* 2. Across a VM exit and entry: the host moves X back. */
	*pte = (*pte & ~PHYSICAL_PAGE_MASK) | new_pa;
	asm volatile("invlpg (%0)" :: "r"(X_GVA) : "memory");
	GUEST_ASSERT_EQ(*x, NEW);
	GUEST_SYNC(0);
	seen = *x;
	asm volatile("invlpg (%0)" :: "r"(X_GVA) : "memory");
	flushed = *x;
	GUEST_ASSERT_EQ(flushed, OLD);
	GUEST_SYNC(seen);
	GUEST_DONE();
}

static uint64_t run(struct kvm_vcpu *vcpu)
{
	struct ucall uc;

	vcpu_run(vcpu);
	switch (get_ucall(vcpu, &uc)) {
	case UCALL_SYNC:
		return uc.args[1];
	case UCALL_ABORT:
		REPORT_GUEST_ASSERT(uc);
	default:
		TEST_FAIL("unexpected ucall %lu", uc.cmd);
	}
	return 0;
}

/* What the guest read, against the page its stale translation points at. */
static const char *verdict(uint64_t seen, uint64_t stale)
{
	if (seen != OLD && seen != NEW)
		return "?";
	return seen == stale ? "kept (stale)" : "dropped";
}

int main(void)
{
	uint64_t old_pa = GPA, new_pa = GPA + PAGE_SIZE, pt_gpa, *pte, alone;
	struct kvm_vcpu *vcpu;
	struct kvm_vm *vm;

	vm = vm_create_with_one_vcpu(&vcpu, guest_code);
	vm_userspace_mem_region_add(vm, VM_MEM_SRC_ANONYMOUS, GPA, SLOT, 2, 0);
	*(uint64_t *)addr_gpa2hva(vm, old_pa) = OLD;
	*(uint64_t *)addr_gpa2hva(vm, new_pa) = NEW;
	virt_map(vm, X_GVA, old_pa, 1);
	pte = vm_get_page_table_entry(vm, X_GVA);
	pt_gpa = addr_hva2gpa(vm, pte);
	virt_map(vm, PT_GVA, pt_gpa & ~(PAGE_SIZE - 1), 1);
	vcpu_args_set(vcpu, 3, PT_GVA + (pt_gpa & (PAGE_SIZE - 1)), old_pa,
		      new_pa);

	alone = run(vcpu);
	TEST_ASSERT(run(vcpu) == 0, "the guest did not stop before the exit");
	/* The guest is out: move X back to the old page, no flush. */
	*pte = (*pte & ~PHYSICAL_PAGE_MASK) | old_pa;
	printf("TLB probe: a PTE write without INVLPG: %s; across a VM exit and entry: %s\n",
	       verdict(alone, OLD), verdict(run(vcpu), NEW));
	kvm_vm_free(vm);
	return 0;
}
