/*
 * dcp_int.h - what dcp.c and megatron_dist.c share, private to the two.
 *
 * dcp.c parses .metadata (dcp.h), writes DCP folders and registers the
 * format; megatron_dist.c opens a folder as one checkpoint, Megatron-Core's
 * torch_dist save folders included, through the entries below.
 */
#ifndef TPC_DCP_INT_H
#define TPC_DCP_INT_H

#include "dcp.h"
#include "formats.h"

/* Free one parsed entry's chunks, names and path, and zero it (an entry
 * dropped before the items are read). */
void tpc__dcp_entry_release(tpc_dcp_entry *en);

/* The format's detect and open hooks (tpc_fmt_dcp). */
int tpc__dcp_detect(const char *path, const uint8_t *head, size_t n);
int tpc__dcp_open(tpc_ckpt *ck, const char *dir, const tpc_open_opts *o, tpc_err *e);

#endif
