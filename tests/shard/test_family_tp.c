/* test_family_tp.c - lib/tpc_family_tp (a Hugging Face tensor's split from
 * its family record, for writers that record splits) against the shard
 * planner's reading of the same plan (shard/tpc_plan.c: first matching rule,
 * tpc_plan_rule_dim): every row of every record's tensor table, weight and
 * bias, gives the same rule, kind, dim and parts; then LLaMA's answers
 * spelled out. */
#include "test_util.h"

#include <string.h>

#include "tpc_family.h"
#include "tpc_family_tp.h"
#include "tpc_plan.h"

/* the planner's answer for name in plan p against the lib's */
static void same_as_plan(const tpc_plan *p, const tpc_family_tp *tp, const char *name, int ndim)
{
	tpc_tp_split s;
	tpc_err e;
	tpc_err_init(&e);
	int ri = tpc_plan_match(p, name);
	bool row_bias = false;
	int d = tpc_plan_rule_dim(p, ri, ndim, &row_bias);
	int rc = tpc_family_tp_split(tp, name, ndim, &s, &e);
	if (d == -2) {
		assert_int_equal(rc, TPC_EINPUT);
		return;
	}
	assert_int_equal(rc, 0);
	assert_int_equal(s.rule, ri);
	if (ri < 0) {
		assert_int_equal(s.kind, TPC_TP_UNKNOWN);
		return;
	}
	const tpc_plan_rule *r = &p->rules[ri];
	assert_string_equal(s.match, r->match);
	if (r->kind == TPC_SPLIT_REPLICATE || d < 0) {
		assert_int_equal(s.kind, TPC_TP_REPLICATE);
		assert_int_equal(s.dim, -1);
		return;
	}
	if (s.parts != (r->nparts > 1 ? r->nparts : 0))
		fail_msg("%s: parts %d, the plan's rule %d ('%s') %d", name, s.parts, ri, r->match, r->nparts);
	assert_int_equal(s.kind, r->kind == TPC_SPLIT_VOCAB ? TPC_TP_VOCAB : TPC_TP_SPLIT);
	assert_int_equal(s.dim, d);
	assert_int_equal(s.parts, r->nparts > 1 ? r->nparts : 0);
	bool uneven = r->gated;
	for (int k = 0; r->parts_listed && r->nparts > 1 && k < r->nparts; k++)
		uneven |= r->parts[k].rest || r->parts[k].sym != TPC_HEADS_NONE || r->parts[k].size != r->parts[0].size;
	assert_int_equal(s.uneven_parts, uneven);
	/* the listed parts, each as the planner reads it */
	assert_int_equal(s.nlisted, r->parts_listed && uneven ? r->nparts : 0);
	for (int k = 0; k < s.nlisted; k++) {
		const tpc_plan_part *pp = &r->parts[k];
		if (pp->rest)
			assert_string_equal(s.part[k].sym, "rest");
		else if (pp->sym != TPC_HEADS_NONE)
			assert_string_equal(s.part[k].sym, tpc_heads_kind_name(pp->sym));
		else
			assert_true(!s.part[k].sym[0] && s.part[k].size == pp->size);
	}
	assert_int_equal(s.stacked, r->stacked);
}

static void test_every_record(void **st)
{
	(void)st;
	size_t checked = 0;
	for (size_t i = 0; i < tpc_family_count(); i++) {
		const tpc_family *f = tpc_family_at(i);
		if (!f->plan || !f->tensors)
			continue;
		tpc_plan p;
		tpc_family_tp *tp = NULL;
		tpc_err e;
		tpc_err_init(&e);
		assert_int_equal(tpc_plan_preset(&p, f->name, &e), 0);
		assert_int_equal(tpc_family_tp_open(&tp, f, &e), 0);
		assert_ptr_equal(tpc_family_tp_family(tp), f);
		for (const tpc_tensor_row *w = f->tensors; w->role != TPC_ROLE_NONE; w++) {
			if (!w->name[TPC_ECO_HF])
				continue;
			for (int b = 0; b <= (int)w->bias; b++) {
				char nm[256];
				if (!tpc_family_name(w, TPC_ECO_HF, 3, 2, b, nm, sizeof(nm), NULL))
					continue;
				int nd = (b ? 1 : 2) + (tpc_family_stacked(w, TPC_ECO_HF) ? 1 : 0);
				same_as_plan(&p, tp, nm, nd);
				same_as_plan(&p, tp, nm, 1);
				checked++;
			}
		}
		tpc_family_tp_free(tp);
		tpc_plan_release(&p);
	}
	assert_true(checked > 500);
}

static void test_llama(void **st)
{
	(void)st;
	static const struct {
		const char *name;
		int ndim;
		tpc_tp_kind kind;
		int dim, parts;
		bool uneven;
	} want[] = {
		{"model.embed_tokens.weight", 2, TPC_TP_VOCAB, 0, 0, false},
		{"lm_head.weight", 2, TPC_TP_VOCAB, 0, 0, false},
		{"model.layers.7.self_attn.q_proj.weight", 2, TPC_TP_SPLIT, 0, 0, false},
		{"model.layers.7.self_attn.k_proj.bias", 1, TPC_TP_SPLIT, 0, 0, false},
		{"model.layers.7.self_attn.o_proj.weight", 2, TPC_TP_SPLIT, 1, 0, false},
		{"model.layers.7.self_attn.o_proj.bias", 1, TPC_TP_REPLICATE, -1, 0, false},
		{"model.layers.7.mlp.gate_proj.weight", 2, TPC_TP_SPLIT, 0, 0, false},
		{"model.layers.7.mlp.down_proj.weight", 2, TPC_TP_SPLIT, 1, 0, false},
		{"model.layers.7.mlp.gate_up_proj.weight", 2, TPC_TP_SPLIT, 0, 2, false},
		{"model.layers.7.self_attn.qkv_proj.weight", 2, TPC_TP_SPLIT, 0, 3, true},
		{"model.layers.7.input_layernorm.weight", 1, TPC_TP_REPLICATE, -1, 0, false},
		{"model.norm.weight", 1, TPC_TP_REPLICATE, -1, 0, false},
		{"model.layers.7.mlp.mystery.weight", 2, TPC_TP_UNKNOWN, -1, 0, false},
	};
	tpc_family_tp *tp = NULL;
	tpc_err e;
	tpc_err_init(&e);
	assert_int_equal(tpc_family_tp_open(&tp, tpc_family_find("llama"), &e), 0);
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		tpc_tp_split s;
		assert_int_equal(tpc_family_tp_split(tp, want[i].name, want[i].ndim, &s, &e), 0);
		if (s.kind != want[i].kind || s.dim != want[i].dim || s.parts != want[i].parts || s.uneven_parts != want[i].uneven)
			fail_msg("%s: kind %d dim %d parts %d uneven %d", want[i].name, s.kind, s.dim, s.parts, s.uneven_parts);
		if (s.uneven_parts) { /* qkv_proj: [q | k | v] */
			assert_int_equal(s.nlisted, 3);
			assert_string_equal(s.part[0].sym, "q");
			assert_string_equal(s.part[2].sym, "kv");
		}
	}
	tpc_family_tp_free(tp);
	/* a record without a plan is refused, not guessed */
	tpc_family nop;
	memset(&nop, 0, sizeof(nop));
	nop.name = "none";
	assert_int_equal(tpc_family_tp_open(&tp, &nop, &e), TPC_EINPUT);
	assert_null(tp);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_record),
		cmocka_unit_test(test_llama),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
