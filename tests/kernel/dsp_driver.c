/*
 * Drives the kernel's DSP decision file (arch/x86/kvm/dsp.c, taken from
 * the patch series) from a line protocol on stdin, for
 * test_dsp_c_equivalence.py.  One answer line per request line:
 *
 *   r NUM SCALE DEN                    -> VALUE   (kvm_dsp_scaled_ratio)
 *   v TU TL PU PL PTU PTL              -> 0|1     (thresholds_valid)
 *   d MODE FTLB FPF CPT HTLB HPT T*6   -> MODE RULE
 *   s INSNS TLB PF HAVE                -> INSNS FTLB FPF PT
 *   g TLBPS PFPS SWNS PPM SWGIB CR3PS  -> 0|1     (guard_valid)
 *   i HISTORY MODE T*6 G*6             -> 0|1     (engine_init)
 *   K CREDIT                           -> CREDIT  (engine_keep_credit)
 *   R MODE                             -> MODE    (engine_reset)
 *   e INSNS TLB PF HAVE NS SW MIB MAINT WALK CR3          -> STEP (counts)
 *   E INSNS FTLB FPF PT TLB PF NS SW MIB MAINT WALK CR3 -> STEP (sample)
 *
 * where STEP is "MODE RULE HTLB HPT" and the guard's ledger: "REGRET LEAD
 * GAIN PAID RUN CREDIT BACKOFF MARGIN SEEN_HAP SEEN_SHADOW MEASURING OWED
 * SIZED MAINT_NS MAINT_N WALK_HAP_NS WALK_HAP_N WALK_SHADOW_NS
 * WALK_SHADOW_N EXPLORED EXPLORING SWITCHED SINCE_CHANGE HAD_DATA_HAP
 * HAD_DATA_SHADOW CR3_LOADS CR3_INSNS".
 * CREDIT is signed; requests carry it as a decimal that may start with
 * "-".
 *
 * The last line printed is "divisions N": how many quotients reached
 * mul_u64_u64_div_u64() (the shim aborts on one that would fault).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsp.h"

unsigned long dsp_shim_divisions;

static int parse(char *p, u64 *v, int n)
{
	int i;

	for (i = 0; i < n; i++) {
		char *end;

		v[i] = strtoull(p, &end, 10);
		if (end == p)
			return -1;
		p = end;
	}
	return 0;
}

static void guard(struct kvm_dsp_guard *g, const u64 *v)
{
	g->tlb_cost_ps = v[0];
	g->pf_cost_ps = v[1];
	g->switch_cost_ns = v[2];
	g->budget_ppm = v[3];
	g->switch_ns_per_gib = v[4];
	g->cr3_cost_ps = v[5];
}

static void thresholds(struct kvm_dsp_thresholds *t, const u64 *v)
{
	t->tlb_upper = v[0];
	t->tlb_lower = v[1];
	t->pf_upper = v[2];
	t->pf_lower = v[3];
	t->pt_upper = v[4];
	t->pt_lower = v[5];
}

static void step(const struct kvm_dsp_engine *e, enum kvm_dsp_mode mode)
{
	printf("%d %d %llu %llu %lld %lld %lld %lld %llu %lld %u %u %llu %llu %d %llu %llu %llu %llu %llu %llu %llu %llu %d %u %d %u %d %d %llu %llu %llu %llu\n",
	       mode, e->last_rule, (unsigned long long)e->last_htlb,
	       (unsigned long long)e->last_hpt, (long long)e->regret,
	       (long long)e->lead, (long long)e->gain, (long long)e->paid,
	       (unsigned long long)e->run_ns, (long long)e->credit,
	       e->backoff, e->margin, (unsigned long long)e->seen[0],
	       (unsigned long long)e->seen[1], e->measuring,
	       (unsigned long long)e->owed, (unsigned long long)e->sized,
	       (unsigned long long)e->maint.ns,
	       (unsigned long long)e->maint.count,
	       (unsigned long long)e->walk[0].ns,
	       (unsigned long long)e->walk[0].count,
	       (unsigned long long)e->walk[1].ns,
	       (unsigned long long)e->walk[1].count, e->explored,
	       e->exploring, e->switched, e->since_change, e->had_data[0],
	       e->had_data[1], (unsigned long long)e->cr3.ns,
	       (unsigned long long)e->cr3.count,
	       (unsigned long long)e->cr3_at,
	       (unsigned long long)e->cr3_wait);
}

int main(void)
{
	static char line[1024];
	struct kvm_dsp_thresholds t;
	struct kvm_dsp_guard g;
	struct kvm_dsp_engine engine;
	struct kvm_dsp_sample s;
	enum kvm_dsp_rule rule;
	enum kvm_dsp_mode mode;
	u64 v[16];

	memset(&engine, 0, sizeof(engine));
	setvbuf(stdout, NULL, _IOFBF, 1 << 20);
	while (fgets(line, sizeof(line), stdin)) {
		char *args = line + 1;

		switch (line[0]) {
		case 'r':
			if (parse(args, v, 3))
				goto bad;
			printf("%llu\n", (unsigned long long)
			       kvm_dsp_scaled_ratio(v[0], v[1], v[2]));
			break;
		case 'c': {
			struct kvm_dsp_counter prev, now;
			u64 delta;
			bool ok;

			if (parse(args, v, 6))
				goto bad;
			prev = (struct kvm_dsp_counter){ v[0], v[1], v[2] };
			now = (struct kvm_dsp_counter){ v[3], v[4], v[5] };
			ok = kvm_dsp_counter_delta(&prev, &now, &delta);
			printf("%d %llu\n", ok, (unsigned long long)delta);
			break;
		}
		case 'v':
			if (parse(args, v, 6))
				goto bad;
			thresholds(&t, v);
			printf("%d\n", kvm_dsp_thresholds_valid(&t));
			break;
		case 'd':
			if (parse(args, v, 12))
				goto bad;
			thresholds(&t, v + 6);
			mode = kvm_dsp_decide((enum kvm_dsp_mode)v[0], v[1],
					      v[2], v[3], v[4], v[5], &t,
					      &rule);
			printf("%d %d\n", mode, rule);
			break;
		case 's':
			if (parse(args, v, 4))
				goto bad;
			kvm_dsp_sample_from_counts(&s, v[0], v[1], v[2],
						   (unsigned int)v[3]);
			printf("%llu %llu %llu %llu\n",
			       (unsigned long long)s.instructions,
			       (unsigned long long)s.ftlb,
			       (unsigned long long)s.fpf,
			       (unsigned long long)s.pt);
			break;
		case 'g':
			if (parse(args, v, 6))
				goto bad;
			guard(&g, v);
			printf("%d\n", kvm_dsp_guard_valid(&g));
			break;
		case 'i':
			if (parse(args, v, 14))
				goto bad;
			thresholds(&t, v + 2);
			guard(&g, v + 8);
			printf("%d\n", kvm_dsp_engine_init(&engine, &t, &g,
				(unsigned int)v[0], (enum kvm_dsp_mode)v[1]));
			break;
		case 'K':
			if (parse(args, v, 1))
				goto bad;
			/* strtoull() reads "-N" as 2^64 - N: the s64 -N. */
			kvm_dsp_engine_keep_credit(&engine, (s64)v[0]);
			printf("%lld\n", (long long)engine.credit);
			break;
		case 'R':
			if (parse(args, v, 1))
				goto bad;
			kvm_dsp_engine_reset(&engine, (enum kvm_dsp_mode)v[0]);
			printf("%d\n", engine.mode);
			break;
		case 'e':
			if (parse(args, v, 10))
				goto bad;
			kvm_dsp_sample_from_counts(&s, v[0], v[1], v[2],
						   (unsigned int)v[3]);
			mode = kvm_dsp_engine_step(&engine, &s, v[4], v[5],
						   v[6], v[7], v[8], v[9]);
			step(&engine, mode);
			break;
		case 'E':
			if (parse(args, v, 12))
				goto bad;
			s.instructions = v[0];
			s.ftlb = v[1];
			s.fpf = v[2];
			s.pt = v[3];
			s.tlb_misses = v[4];
			s.page_faults = v[5];
			mode = kvm_dsp_engine_step(&engine, &s, v[6], v[7],
						   v[8], v[9], v[10], v[11]);
			step(&engine, mode);
			break;
		default:
			goto bad;
		}
	}
	printf("divisions %lu\n", dsp_shim_divisions);
	return 0;
bad:
	fprintf(stderr, "bad request: %s", line);
	return 2;
}
