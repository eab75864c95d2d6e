/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What both calibration microbenchmarks print: events from getrusage()
 * and, where the kernel lets this process count them, hardware counters
 * (dTLB load misses, instructions) from perf_event_open(); -1 where a
 * counter cannot be opened (most guests without a virtual PMU).
 */
#ifndef NAP_BENCH_COMMON_H
#define NAP_BENCH_COMMON_H

#define _GNU_SOURCE
#include <errno.h>
#include <linux/perf_event.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

struct nap_counter {
	int fd;
	const char *name;
};

static inline int nap_perf_open(uint32_t type, uint64_t config)
{
	struct perf_event_attr attr;

	memset(&attr, 0, sizeof(attr));
	attr.size = sizeof(attr);
	attr.type = type;
	attr.config = config;
	attr.disabled = 1;
	attr.exclude_kernel = 1;
	attr.exclude_hv = 1;
	attr.inherit = 1;	/* fork churn: count the children too */
	return (int)syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0);
}

static inline void nap_counters_open(struct nap_counter c[2])
{
	c[0].name = "tlb_misses";
	c[0].fd = nap_perf_open(PERF_TYPE_HW_CACHE,
				PERF_COUNT_HW_CACHE_DTLB |
				(PERF_COUNT_HW_CACHE_OP_READ << 8) |
				(PERF_COUNT_HW_CACHE_RESULT_MISS << 16));
	c[1].name = "instructions";
	c[1].fd = nap_perf_open(PERF_TYPE_HARDWARE,
				PERF_COUNT_HW_INSTRUCTIONS);
	for (int i = 0; i < 2; i++)
		if (c[i].fd >= 0)
			ioctl(c[i].fd, PERF_EVENT_IOC_ENABLE, 0);
}

static inline long long nap_counter_read(const struct nap_counter *c)
{
	uint64_t v;

	if (c->fd < 0 || read(c->fd, &v, sizeof(v)) != sizeof(v))
		return -1;
	return (long long)v;
}

static inline double nap_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/*
 * CPU seconds of this process and its waited-for children (user and
 * system).  The fit compares the modes by this, not by nap_now(): a
 * host that calibrates with guests running (or a busy build machine)
 * hands the benchmark's vCPU to others for a while, which adds wall
 * time to one run and not the other.  A guest kernel with steal-time
 * accounting charges none of that wait to the process; the exits the
 * paging mode causes are the vCPU's own time and stay in.
 */
static inline double nap_cpu_s(void)
{
	struct rusage self, kids;

	getrusage(RUSAGE_SELF, &self);
	getrusage(RUSAGE_CHILDREN, &kids);
	return self.ru_utime.tv_sec + self.ru_stime.tv_sec +
	       kids.ru_utime.tv_sec + kids.ru_stime.tv_sec +
	       (self.ru_utime.tv_usec + self.ru_stime.tv_usec +
		kids.ru_utime.tv_usec + kids.ru_stime.tv_usec) * 1e-6;
}

/* Minor and major faults of this process and its waited-for children. */
static inline void nap_faults(long long *minflt, long long *majflt)
{
	struct rusage self, kids;

	getrusage(RUSAGE_SELF, &self);
	getrusage(RUSAGE_CHILDREN, &kids);
	*minflt = self.ru_minflt + kids.ru_minflt;
	*majflt = self.ru_majflt + kids.ru_majflt;
}

static inline long nap_arg(const char *flag, const char *value, long min)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(value ? value : "", &end, 0);
	if (errno || !value || *end || v < min) {
		fprintf(stderr, "%s: %s; expected an integer >= %ld\n",
			flag, value ? value : "(missing)", min);
		exit(2);
	}
	return v;
}

#endif
