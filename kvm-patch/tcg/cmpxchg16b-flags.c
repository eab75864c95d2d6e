// SPDX-License-Identifier: GPL-2.0
/*
 * CMPXCHG16B's flags under an emulator, against the CPU's.
 *
 * CMPXCHG16B writes ZF and leaves the other flags alone.  QEMU 7.2's TCG
 * has its helper compute the old flags from the condition-code operation
 * stored in the CPU state, which the translator has not updated for the
 * instructions before it in the same translation block.  A block that
 * begins with the flags in their stored form (here, right after POPF,
 * which ends a block) and then ADDs leaves the ADD's operand where that
 * stored form keeps the flags: the helper takes the operand for RFLAGS.
 * The pointer below is the one whose low 32 bits a Linux guest's RFLAGS
 * held when its kernel failed (kvm-patch/doc/findings.md).
 *
 *   gcc -O2 -o cmpxchg16b-flags cmpxchg16b-flags.c
 *   ./cmpxchg16b-flags                 # the CPU: 0x2c2, exit 0
 *   qemu-x86_64 ./cmpxchg16b-flags     # Debian's QEMU 7.2: 0x40462d2, exit 1
 *
 * Exit 1 when RFLAGS holds anything but the arithmetic flags, TF, IF, DF
 * and the always-set bit 1.
 */
#include <stdint.h>
#include <stdio.h>

static __int128 mem __attribute__((aligned(16)));

int main(void)
{
	uint64_t rflags, sum = 0, lo = 0, hi = 0;
	uint64_t ptr = 0xffff888004046092ull;

	asm volatile("pushq $0x2\n\t"
		     "popfq\n\t"
		     "add %[p], %[s]\n\t"
		     "cmpxchg16b %[m]\n\t"
		     "pushfq\n\t"
		     "popq %[f]\n\t"
		     : [f] "=r" (rflags), [s] "+r" (sum), [m] "+m" (mem),
		       "+a" (lo), "+d" (hi)
		     : [p] "r" (ptr), "b" (1ull), "c" (0ull)
		     : "cc");
	printf("RFLAGS after CMPXCHG16B: %#llx\n", (unsigned long long)rflags);
	return (rflags & ~0xfd5ull) != 0x2;
}
