/* fuzz_manifest.c - a shard set's tpconv-manifest.json (shard/tpc_manifest.c):
 * read by merge and reshard from a folder that may come from anyone. */
#include "fuzz.h"
#include "tpc_manifest.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	tpc_manifest m;
	tpc_err e;
	memset(&m, 0, sizeof(m));
	tpc_err_init(&e);
	int r = tpc_manifest_from_buffer(&m, (const char *)data, size, "tpconv-manifest.json", &e);
	fuzz_check_status(r, &e);
	if (!r) {
		FUZZ_CHECK(m.tp >= 1 && m.pp >= 1);
		FUZZ_CHECK(tpc_hash_name(m.checksum) != NULL);
		/* relative names inside the set folder: components (hf folders,
		 * megatron's release/mp_rank_TT/...) neither empty nor dot-led */
		for (int i = 0; i < m.tp * m.pp; i++) {
			const char *f = m.files[i];
			FUZZ_CHECK(f && *f && !strchr(f, '\\'));
			for (const char *c = f; c; c = strchr(c, '/') ? strchr(c, '/') + 1 : NULL)
				FUZZ_CHECK(*c && *c != '/' && *c != '.');
		}
		for (size_t i = 0; i < m.n; i++) {
			const tpc_manifest_tensor *t = &m.t[i];
			FUZZ_CHECK(t->ndim >= 0 && t->stage >= 0 && t->stage < m.pp);
			/* a named checksum covers every tensor and rank; none has no members */
			FUZZ_CHECK(t->has_hash == (m.checksum != TPC_HASH_NONE));
			FUZZ_CHECK(!t->rank_hash == (m.checksum == TPC_HASH_NONE));
			if (t->split.kind != TPC_SPLIT_REPLICATE)
				FUZZ_CHECK(t->split.dim >= 0 && t->split.dim < t->ndim &&
					   t->split.nparts >= 1 && t->split.nparts <= TPC_PLAN_MAX_PARTS);
		}
		if (m.plan_json) {
			/* reshard parses the plan the manifest carries */
			tpc_plan p;
			tpc_err_init(&e);
			r = tpc_plan_from_buffer(&p, m.plan_json, strlen(m.plan_json), "the manifest's plan", &e);
			fuzz_check_status(r, &e);
			tpc_plan_release(&p);
		}
	}
	tpc_manifest_release(&m);
	return 0;
}
