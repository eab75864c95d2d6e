// SPDX-License-Identifier: Apache-2.0
/*
 * TLB-miss-heavy calibration workload: a random pointer chase with one
 * pointer per page.  Each pointer sits at (page * stride), so with the
 * default stride of a page plus a cache line the chase touches a
 * different page on every access while its lines spread over the cache
 * sets and fit the last-level cache: with a working set well beyond the
 * TLB's reach almost every access is a TLB miss and few are a memory
 * access, which is what makes the nested (2-D) walk of hap mode show.
 *
 *   nap-tlb-chase [--pages N] [--stride BYTES] [--accesses N] [--seed S]
 *
 * Prints one JSON object: the work done, elapsed seconds (the whole run,
 * set-up included, as the faults are), the chase's time per access, the
 * faults and, where countable, dTLB misses and instructions.
 */
#include "nap-bench-common.h"

#include <sys/mman.h>

int main(int argc, char **argv)
{
	long pages = 16384, stride = 4096 + 64, accesses = 20000000;
	unsigned long seed = 1;
	struct nap_counter ctr[2];
	long long minflt, majflt;
	double start, cpu_start, chase_start, chase_end;
	size_t *order, bytes;
	char *mem;
	void **p;

	for (int i = 1; i < argc; i += 2) {
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(argv[i], "--pages"))
			pages = nap_arg(argv[i], v, 2);
		else if (!strcmp(argv[i], "--stride"))
			stride = nap_arg(argv[i], v, (long)sizeof(void *));
		else if (!strcmp(argv[i], "--accesses"))
			accesses = nap_arg(argv[i], v, 1);
		else if (!strcmp(argv[i], "--seed"))
			seed = (unsigned long)nap_arg(argv[i], v, 0);
		else {
			fprintf(stderr, "%s: unknown option; expected --pages, "
				"--stride, --accesses or --seed\n", argv[i]);
			return 2;
		}
	}
	start = nap_now();
	cpu_start = nap_cpu_s();
	nap_counters_open(ctr);
	bytes = (size_t)pages * (size_t)stride;
	mem = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	order = malloc(sizeof(*order) * (size_t)pages);
	if (mem == MAP_FAILED || !order) {
		fprintf(stderr, "--pages %ld --stride %ld: cannot map %zu bytes\n",
			pages, stride, bytes);
		return 1;
	}
	/* One random cycle through all slots (Sattolo's shuffle). */
	srandom(seed);
	for (long i = 0; i < pages; i++)
		order[i] = (size_t)i;
	for (long i = pages - 1; i > 0; i--) {
		long j = random() % i;
		size_t t = order[i];

		order[i] = order[j];
		order[j] = t;
	}
	for (long i = 0; i < pages; i++)
		*(void **)(mem + order[i] * stride) =
			mem + order[(i + 1) % pages] * stride;
	p = (void **)(mem + order[0] * stride);
	chase_start = nap_now();
	for (long i = 0; i < accesses; i++)
		p = *p;
	chase_end = nap_now();
	nap_faults(&minflt, &majflt);
	printf("{\"bench\": \"tlb-chase\", \"pages\": %ld, \"stride\": %ld, "
	       "\"working_set_bytes\": %zu, \"accesses\": %ld, "
	       "\"elapsed_s\": %.6f, \"cpu_s\": %.6f, \"ns_per_access\": %.4f, "
	       "\"minflt\": %lld, \"majflt\": %lld, \"tlb_misses\": %lld, "
	       "\"instructions\": %lld, \"end\": %d}\n",
	       pages, stride, bytes, accesses, nap_now() - start,
	       nap_cpu_s() - cpu_start,
	       (chase_end - chase_start) * 1e9 / accesses, minflt, majflt,
	       nap_counter_read(&ctr[0]), nap_counter_read(&ctr[1]),
	       p == NULL);
	return 0;
}
