/* User-space stand-in for <linux/types.h>, for tests/kernel only. */
#ifndef DSP_SHIM_LINUX_TYPES_H
#define DSP_SHIM_LINUX_TYPES_H

#include <stdbool.h>
#include <stdint.h>

typedef uint64_t u64;
typedef uint32_t u32;
typedef uint16_t u16;
typedef uint8_t u8;
typedef int64_t s64;

#endif
