// SPDX-License-Identifier: Apache-2.0
/*
 * Page-fault-heavy calibration workload, the guest page faults that make
 * shadow mode pay (every fault and unmap exits to the hypervisor):
 *
 *   --rounds R   mmap N anonymous pages, write one byte in each, munmap,
 *                R times (one minor fault per page touched);
 *   --forks F    F times, fork a child that writes one byte in each of
 *                the N pages of a private mapping (copy on write) and
 *                exits; the parent waits.
 *
 *   nap-fault-churn [--pages N] [--rounds R] [--forks F]
 *
 * Prints one JSON object with the pages touched, elapsed seconds and the
 * faults (the children's included).
 */
#include "nap-bench-common.h"

#include <sys/mman.h>
#include <sys/wait.h>

int main(int argc, char **argv)
{
	long pages = 4096, rounds = 25, forks = 10;
	long page = sysconf(_SC_PAGESIZE);
	struct nap_counter ctr[2];
	long long minflt, majflt;
	double start, cpu_start;
	char *shared;

	for (int i = 1; i < argc; i += 2) {
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(argv[i], "--pages"))
			pages = nap_arg(argv[i], v, 1);
		else if (!strcmp(argv[i], "--rounds"))
			rounds = nap_arg(argv[i], v, 0);
		else if (!strcmp(argv[i], "--forks"))
			forks = nap_arg(argv[i], v, 0);
		else {
			fprintf(stderr, "%s: unknown option; expected --pages, "
				"--rounds or --forks\n", argv[i]);
			return 2;
		}
	}
	start = nap_now();
	cpu_start = nap_cpu_s();
	nap_counters_open(ctr);
	for (long r = 0; r < rounds; r++) {
		volatile char *m = mmap(NULL, pages * page,
					PROT_READ | PROT_WRITE,
					MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (m == MAP_FAILED) {
			perror("mmap");
			return 1;
		}
		for (long i = 0; i < pages; i++)
			m[i * page] = 1;
		munmap((void *)m, pages * page);
	}
	shared = mmap(NULL, pages * page, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (shared == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	memset(shared, 0, pages * page);
	for (long f = 0; f < forks; f++) {
		pid_t pid = fork();
		int status;

		if (pid < 0) {
			perror("fork");
			return 1;
		}
		if (pid == 0) {
			for (long i = 0; i < pages; i++)
				((volatile char *)shared)[i * page] = 2;
			_exit(0);
		}
		if (waitpid(pid, &status, 0) != pid || status != 0) {
			fprintf(stderr, "fork churn: child failed\n");
			return 1;
		}
	}
	nap_faults(&minflt, &majflt);
	printf("{\"bench\": \"fault-churn\", \"pages\": %ld, \"rounds\": %ld, "
	       "\"forks\": %ld, \"pages_touched\": %ld, \"elapsed_s\": %.6f, "
	       "\"cpu_s\": %.6f, \"minflt\": %lld, \"majflt\": %lld, \"tlb_misses\": %lld, "
	       "\"instructions\": %lld}\n",
	       pages, rounds, forks, pages * (rounds + forks + 1),
	       nap_now() - start, nap_cpu_s() - cpu_start, minflt, majflt, nap_counter_read(&ctr[0]),
	       nap_counter_read(&ctr[1]));
	return 0;
}
