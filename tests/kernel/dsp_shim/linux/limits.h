/* User-space stand-in for <linux/limits.h>, for tests/kernel only. */
#ifndef DSP_SHIM_LINUX_LIMITS_H
#define DSP_SHIM_LINUX_LIMITS_H

#include "types.h"

#define U64_MAX ((u64)~0ULL)

#endif
