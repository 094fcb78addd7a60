/* report.c - the verify report as a `#` table, JSON and JUnit XML; the
 * schemas are in tpc_verify.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpc_util.h"
#include "tpc_verify.h"

void tpc_verify_report_init(tpc_verify_report *rep)
{
	memset(rep, 0, sizeof(*rep));
	rep->backend = "threads";
	rep->device = "cpu";
	rep->collectives = "threads";
}

void tpc_verify_report_release(tpc_verify_report *rep)
{
	free(rep->r);
	memset(rep, 0, sizeof(*rep));
}

int tpc_verify_report_add(tpc_verify_report *rep, const tpc_vresult *r)
{
	if (tpc_grow((void **)&rep->r, &rep->cap, rep->n + 1, sizeof(*rep->r)))
		return TPC_EIO;
	rep->r[rep->n++] = *r;
	if (r->status == TPC_VR_FAIL)
		rep->nfail++;
	else if (r->status == TPC_VR_SKIP)
		rep->nskip++;
	else
		rep->npass++;
	return 0;
}

/* The text header names the collectives only when they are not the backend's
 * own (NCCL under threads or MPI). */
static bool coll_differs(const tpc_verify_report *rep)
{
	return rep->collectives && rep->backend && strcmp(rep->collectives, rep->backend);
}

static const char *status_name(int s)
{
	return s == TPC_VR_FAIL ? "fail" : s == TPC_VR_SKIP ? "skip" : "pass";
}

void tpc_verify_report_table(const tpc_verify_report *rep, bool failures_only, tpc_buf *b)
{
	int w = 40;
	for (size_t i = 0; i < rep->n; i++) {
		int l = (int)strlen(rep->r[i].name);
		if (l > w)
			w = l < 96 ? l : 96;
	}
	char dp[48] = "";
	if (rep->dp > 1)
		snprintf(dp, sizeof(dp), " (tp %d x dp %d)", rep->tp / rep->dp, rep->dp);
	tpc_buf_addf(b, "# tpconv verify: tp %d%s, seed %llu, %d tokens, %s on %s%s%s\n", rep->tp, dp,
		     (unsigned long long)rep->seed, rep->tokens, rep->backend ? rep->backend : "?",
		     rep->device ? rep->device : "?", coll_differs(rep) ? ", collectives " : "",
		     coll_differs(rep) ? rep->collectives : "");
	tpc_buf_addf(b, "# %-9s  %-*s  %-5s  %12s  %12s  %s\n", "check", w, "tensor", "dtype", "max abs", "max rel",
		     "pass");
	for (size_t i = 0; i < rep->n; i++) {
		const tpc_vresult *r = &rep->r[i];
		if (failures_only && r->status != TPC_VR_FAIL)
			continue;
		tpc_buf_addf(b, "  %-9s  %-*s  %-5s  %12.4g  %12.4g  %s", tpc_vcheck_name((tpc_vcheck)r->kind), w, r->name,
			     r->dtype, r->max_abs, r->max_rel, r->status == TPC_VR_FAIL ? "FAIL" : status_name(r->status));
		if (r->kind == TPC_VC_MODEL && r->top1_total)
			tpc_buf_addf(b, "  top-1 %lld/%lld", (long long)r->top1_agree, (long long)r->top1_total);
		tpc_buf_addc(b, '\n');
		if (r->status == TPC_VR_FAIL) {
			if (r->msg[0])
				tpc_buf_addf(b, "#   %s\n", r->msg);
			for (int d = 0; d < r->ndiff; d++)
				tpc_buf_addf(b, "#   rank %d index %lld: expected %.9g, got %.9g\n", r->diff[d].rank,
					     (long long)r->diff[d].index, r->diff[d].expected, r->diff[d].actual);
		}
	}
	tpc_buf_addf(b, "# %zu passed, %zu failed, %zu skipped in %.2f s\n", rep->npass, rep->nfail, rep->nskip,
		     rep->seconds);
}

void tpc_verify_report_json(const tpc_verify_report *rep, tpc_buf *b)
{
	tpc_buf_addf(b, "{\n  \"tpconv_verify\": 1,\n  \"tp\": %d,\n  \"seed\": %llu,\n  \"tokens\": %d,\n", rep->tp,
		     (unsigned long long)rep->seed, rep->tokens);
	if (rep->dp > 1)
		tpc_buf_addf(b, "  \"dp\": %d,\n", rep->dp);
	tpc_buf_addf(b, "  \"backend\": \"%s\",\n  \"device\": \"%s\",\n  \"collectives\": \"%s\",\n",
		     rep->backend ? rep->backend : "", rep->device ? rep->device : "",
		     rep->collectives ? rep->collectives : "");
	tpc_buf_addf(b, "  \"passed\": %zu,\n  \"failed\": %zu,\n  \"skipped\": %zu,\n  \"ok\": %s,\n", rep->npass,
		     rep->nfail, rep->nskip, rep->nfail ? "false" : "true");
	tpc_buf_addf(b, "  \"seconds\": %.3f,\n  \"weights_read\": %llu,\n  \"checks\": [", rep->seconds,
		     (unsigned long long)rep->weights_read);
	for (size_t i = 0; i < rep->n; i++) {
		const tpc_vresult *r = &rep->r[i];
		tpc_buf_adds(b, i ? ",\n    {" : "\n    {");
		tpc_buf_addf(b, "\"check\": \"%s\", \"tensor\": ", tpc_vcheck_name((tpc_vcheck)r->kind));
		tpc_buf_json_str(b, r->name, strlen(r->name), false);
		tpc_buf_addf(b, ", \"dtype\": \"%s\", \"status\": \"%s\", \"elements\": %llu, \"mismatches\": %llu, ",
			     r->dtype, status_name(r->status), (unsigned long long)r->elements,
			     (unsigned long long)r->mismatches);
		tpc_buf_addf(b, "\"capped\": %s, ", r->capped ? "true" : "false");
		tpc_buf_adds(b, "\"max_abs\": ");
		tpc_buf_json_num(b, r->max_abs, 9);
		tpc_buf_adds(b, ", \"max_rel\": ");
		tpc_buf_json_num(b, r->max_rel, 9);
		tpc_buf_adds(b, ", \"rtol\": ");
		tpc_buf_json_num(b, r->rtol, 9);
		tpc_buf_adds(b, ", \"atol\": ");
		tpc_buf_json_num(b, r->atol, 9);
		if (r->kind == TPC_VC_MODEL)
			tpc_buf_addf(b, ", \"top1\": [%lld, %lld]", (long long)r->top1_agree, (long long)r->top1_total);
		if (r->kind == TPC_VC_STRUCTURE)
			tpc_buf_adds(b, ", \"digest\": \"\"");
		else
			tpc_buf_addf(b, ", \"digest\": \"%016llx\"", (unsigned long long)r->digest);
		tpc_buf_adds(b, ", \"message\": ");
		tpc_buf_json_str(b, r->msg, strlen(r->msg), false);
		tpc_buf_adds(b, ", \"first\": [");
		for (int d = 0; d < r->ndiff; d++) {
			tpc_buf_addf(b, "%s{\"rank\": %d, \"index\": %lld, \"expected\": ", d ? ", " : "", r->diff[d].rank,
				     (long long)r->diff[d].index);
			tpc_buf_json_num(b, r->diff[d].expected, 9);
			tpc_buf_adds(b, ", \"actual\": ");
			tpc_buf_json_num(b, r->diff[d].actual, 9);
			tpc_buf_addc(b, '}');
		}
		tpc_buf_adds(b, "]}");
	}
	tpc_buf_adds(b, rep->n ? "\n  ]\n}\n" : "]\n}\n");
}

void tpc_verify_report_junit(const tpc_verify_report *rep, tpc_buf *b)
{
	tpc_buf_adds(b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
	tpc_buf_addf(b, "<testsuites name=\"tpconv\" tests=\"%zu\" failures=\"%zu\" skipped=\"%zu\" time=\"%.3f\">\n",
		     rep->n, rep->nfail, rep->nskip, rep->seconds);
	tpc_buf_addf(b,
		     "  <testsuite name=\"tpconv-verify\" tests=\"%zu\" failures=\"%zu\" errors=\"0\" skipped=\"%zu\" time=\"%.3f\">\n",
		     rep->n, rep->nfail, rep->nskip, rep->seconds);
	tpc_buf_addf(b, "    <properties><property name=\"tp\" value=\"%d\"/><property name=\"seed\" value=\"%llu\"/>"
			"<property name=\"backend\" value=\"%s\"/><property name=\"device\" value=\"%s\"/>"
			"<property name=\"collectives\" value=\"%s\"/></properties>\n",
		     rep->tp, (unsigned long long)rep->seed, rep->backend ? rep->backend : "", rep->device ? rep->device : "",
		     rep->collectives ? rep->collectives : "");
	for (size_t i = 0; i < rep->n; i++) {
		const tpc_vresult *r = &rep->r[i];
		tpc_buf_addf(b, "    <testcase classname=\"%s\" name=\"", tpc_vcheck_name((tpc_vcheck)r->kind));
		tpc_buf_xml_str(b, r->name, strlen(r->name));
		tpc_buf_adds(b, "\" time=\"0\"");
		if (r->status == TPC_VR_PASS) {
			tpc_buf_adds(b, "/>\n");
			continue;
		}
		tpc_buf_adds(b, ">\n");
		if (r->status == TPC_VR_SKIP) {
			tpc_buf_adds(b, "      <skipped message=\"");
			tpc_buf_xml_str(b, r->msg, strlen(r->msg));
			tpc_buf_adds(b, "\"/>\n");
		} else {
			tpc_buf_adds(b, "      <failure type=\"mismatch\" message=\"");
			tpc_buf_xml_str(b, r->msg, strlen(r->msg));
			tpc_buf_addf(b, "\">max abs %.9g, max rel %.9g, %s%llu of %llu differ", r->max_abs, r->max_rel,
				     r->capped ? "more than " : "", (unsigned long long)r->mismatches,
				     (unsigned long long)r->elements);
			for (int d = 0; d < r->ndiff; d++)
				tpc_buf_addf(b, "\nrank %d index %lld: expected %.9g, got %.9g", r->diff[d].rank,
					     (long long)r->diff[d].index, r->diff[d].expected, r->diff[d].actual);
			tpc_buf_adds(b, "</failure>\n");
		}
		tpc_buf_adds(b, "    </testcase>\n");
	}
	tpc_buf_adds(b, "  </testsuite>\n</testsuites>\n");
}
