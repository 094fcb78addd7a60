/* tpc_progress.c - rate-limited progress line; see tpc_progress.h. */
#include "tpc_progress.h"

#include <string.h>
#include <unistd.h>

#include "tpc_util.h"

void tpc_progress_init(tpc_progress *p, FILE *fp, bool enabled, const char *label, uint64_t total)
{
	memset(p, 0, sizeof(*p));
	p->fp = fp;
	p->enabled = enabled && fp;
	p->tty = fp && isatty(fileno(fp));
	snprintf(p->label, sizeof(p->label), "%s", label ? label : "");
	p->total = total;
	p->t0 = p->last = tpc_now();
	p->interval = p->tty ? 0.25 : 2.0;
}

static void draw(tpc_progress *p, uint64_t done, bool final)
{
	char a[32], b[32];
	double dt = tpc_now() - p->t0;
	double rate = dt > 0 ? (double)done / dt : 0;
	char r[32];
	tpc_fmt_size((uint64_t)rate, r, sizeof(r));
	tpc_fmt_size(done, a, sizeof(a));
	tpc_fmt_size(p->total, b, sizeof(b));
	if (p->unit && p->total)
		fprintf(p->fp, "%s%s: %llu / %llu %s (%3.0f%%)%s", p->tty ? "\r" : "", p->label, (unsigned long long)done,
			(unsigned long long)p->total, p->unit, 100.0 * (double)done / (double)p->total,
			p->tty && !final ? "   " : "\n");
	else if (p->total)
		fprintf(p->fp, "%s%s: %s / %s (%3.0f%%), %s/s%s", p->tty ? "\r" : "", p->label, a, b,
			100.0 * (double)done / (double)p->total, r, p->tty && !final ? "   " : "\n");
	else
		fprintf(p->fp, "%s%s: %s, %s/s%s", p->tty ? "\r" : "", p->label, a, r,
			p->tty && !final ? "   " : "\n");
	fflush(p->fp);
}

void tpc_progress_add(tpc_progress *p, uint64_t n)
{
	if (!p || !p->enabled)
		return;
	uint64_t done = __atomic_add_fetch(&p->done, n, __ATOMIC_RELAXED);
	if (__atomic_exchange_n(&p->drawing, 1, __ATOMIC_ACQUIRE))
		return;
	double now = tpc_now();
	if (now - p->last >= p->interval) {
		p->last = now;
		draw(p, done, false);
	}
	__atomic_store_n(&p->drawing, 0, __ATOMIC_RELEASE);
}

void tpc_progress_end(tpc_progress *p)
{
	if (!p || !p->enabled)
		return;
	draw(p, __atomic_load_n(&p->done, __ATOMIC_RELAXED), true);
}
