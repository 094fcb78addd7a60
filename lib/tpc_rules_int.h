/*
 * tpc_rules_int.h - what the remap stage's files share (tpc_rules.c, the
 * rule list and the plan; tpc_rules_doc.c, rules files and presets;
 * tpc_keys.c, expected keys); private to lib/, not installed.
 */
#ifndef TPC_RULES_INT_H
#define TPC_RULES_INT_H

#include <stdbool.h>

#include "tpc_buf.h"
#include "tpc_dtype.h"

/* The dtypes a dtype rule casts to. */
static inline bool tpc__cast_target(tpc_dtype t)
{
	return t == TPC_F16 || t == TPC_BF16 || t == TPC_F32 || t == TPC_F64;
}

/* Append a tensor name for a listing, control characters as '?' (as
 * tpc_sanitize, with no length limit). */
static inline void tpc__add_name(tpc_buf *b, const char *s)
{
	for (; *s; s++)
		tpc_buf_addc(b, ((unsigned char)*s < 0x20 || *s == 0x7f) ? '?' : *s);
}

#endif
