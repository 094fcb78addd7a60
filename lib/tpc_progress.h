/*
 * tpc_progress.h - a rate-limited progress line on stderr.
 *
 * The command line decides whether progress is shown (stderr is a terminal,
 * or --progress); the library only reports bytes done. Updates are thread safe
 * (an atomic counter) and drawn at most a few times a second by whichever
 * thread gets there first. On a terminal the line is redrawn with '\r'; when
 * forced onto a non-terminal, plain lines are printed (no escape codes).
 * With `unit` set (after init, before the first add) the counts are things,
 * not bytes: "verify: 120 / 291 steps (41%)"; total may be set then too.
 */
#ifndef TPC_PROGRESS_H
#define TPC_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

typedef struct tpc_progress {
	FILE *fp;
	bool enabled, tty;
	char label[64];
	uint64_t total;
	uint64_t done;     /* atomic */
	double t0;
	double last;       /* guarded by `drawing` */
	int drawing;       /* atomic flag */
	double interval;   /* seconds between updates */
	const char *unit;  /* NULL: bytes; else what is counted ("steps") */
} tpc_progress;

void tpc_progress_init(tpc_progress *p, FILE *fp, bool enabled, const char *label, uint64_t total);
void tpc_progress_add(tpc_progress *p, uint64_t n); /* NULL p is a no-op */
void tpc_progress_end(tpc_progress *p);

#endif
