/*
 * User-space stand-in for the <linux/math64.h> helpers the DSP decision
 * file uses, for tests/kernel only.  mul_u64_u64_div_u64() aborts where
 * the x86-64 kernel version ("mulq; divq") would raise #DE: a zero divisor
 * or a quotient of 2^64 or more.  Define DSP_SHIM_GENERIC to use the
 * shift-and-subtract versions instead of unsigned __int128 (as the kernel
 * does on architectures without 128-bit arithmetic).
 */
#ifndef DSP_SHIM_LINUX_MATH64_H
#define DSP_SHIM_LINUX_MATH64_H

#include <stdlib.h>

#include "types.h"

extern unsigned long dsp_shim_divisions;

static inline void dsp_shim_mul(u64 a, u64 b, u64 *hi, u64 *lo)
{
#ifndef DSP_SHIM_GENERIC
	unsigned __int128 p = (unsigned __int128)a * b;

	*hi = (u64)(p >> 64);
	*lo = (u64)p;
#else
	u64 al = (u32)a, ah = a >> 32, bl = (u32)b, bh = b >> 32;
	u64 p0 = al * bl, p1 = al * bh, p2 = ah * bl, p3 = ah * bh;
	u64 mid = (p0 >> 32) + (u32)p1 + (u32)p2;

	*lo = (mid << 32) | (u32)p0;
	*hi = p3 + (p1 >> 32) + (p2 >> 32) + (mid >> 32);
#endif
}

static inline u64 mul_u64_u64_shr(u64 a, u64 b, unsigned int shift)
{
	u64 hi, lo;

	dsp_shim_mul(a, b, &hi, &lo);
	if (!shift)
		return lo;
	return (hi << (64 - shift)) | (lo >> shift);
}

static inline u64 mul_u64_u64_div_u64(u64 a, u64 b, u64 c)
{
	u64 hi, lo, q = 0;
	int i;

	dsp_shim_mul(a, b, &hi, &lo);
	if (!c || hi >= c)
		abort();	/* divq would raise #DE */
	dsp_shim_divisions++;
#ifndef DSP_SHIM_GENERIC
	q = (u64)((((unsigned __int128)hi << 64) | lo) / c);
#else
	for (i = 0; i < 64; i++) {
		u64 carry = hi >> 63;

		hi = (hi << 1) | (lo >> 63);
		lo <<= 1;
		q <<= 1;
		if (carry || hi >= c) {
			hi -= c;
			q |= 1;
		}
	}
#endif
	(void)i;
	return q;
}

static inline u64 div_u64(u64 dividend, u32 divisor)
{
	return dividend / divisor;
}

static inline u64 div64_u64(u64 dividend, u64 divisor)
{
	if (!divisor)
		abort();	/* divq would raise #DE */
	return dividend / divisor;
}

static inline u64 div64_u64_rem(u64 dividend, u64 divisor, u64 *remainder)
{
	if (!divisor)
		abort();
	*remainder = dividend % divisor;
	return dividend / divisor;
}

#endif
