/*
 * pickle_shape.c - what the pickle VM (pickle.c) checks on its result once
 * STOP is reached: how deep it nests, how many values it expands to through
 * shared subtrees, and that builtins.getattr appears only as a pickled enum
 * member. Also the walk over a value's children that the VM's cycle check
 * shares. Declared in pickle.h (private part).
 */
#include "pickle.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "tpc_util.h"

#define BAD(sh, e, ...) TPC_CORRUPT((e), (sh)->path, (sh)->off, NULL, __VA_ARGS__)

bool tpc__pickle_has_children(const tpc_value *v)
{
	return v->n > 0 || tpc_value_origin(v) != NULL;
}

/*
 * The result's nesting depth and its size counting every use of a shared
 * subtree, in one pass over the distinct nodes (the DAG), so that consumers
 * may recurse and walk naively within the limits. It runs after the memo and
 * the stack are released, so a node with one reference has one parent and is
 * met once: only shared nodes go through the map.
 */
typedef struct sframe {
	const tpc_value *v;
	size_t j;
	uint64_t depth, size;
} sframe;

static bool is_getattr(const tpc_value *v)
{
	return v && v->kind == TPC_V_GLOBAL && !strcmp(v->str, "builtins.getattr");
}

static bool identifier(const tpc_value *v)
{
	if (!v || v->kind != TPC_V_STR || !v->len || v->len > 256 || isdigit((unsigned char)v->str[0]))
		return false;
	for (size_t i = 0; i < v->len; i++)
		if (!isalnum((unsigned char)v->str[i]) && v->str[i] != '_')
			return false;
	return true;
}

/* CALL[getattr, (GLOBAL class, 'member')] with no BUILD state, where the
 * class is neither a builtin nor a dangerous global and the member is a
 * public name: what an enum member pickles as. getattr(object,
 * '__subclasses__'), the first step of the classic exploit chain, is not. */
static bool enum_member(const tpc_value *v)
{
	if (v->kind != TPC_V_CALL || v->n != 2 || v->items[1]->kind != TPC_V_TUPLE || v->items[1]->n != 2)
		return false;
	const tpc_value *cls = v->items[1]->items[0], *mem = v->items[1]->items[1];
	if (cls->kind != TPC_V_GLOBAL || !identifier(mem) || mem->str[0] == '_')
		return false;
	const char *name;
	size_t ml = tpc_value_global_split(cls, &name);
	char mod[256];
	if (ml >= sizeof(mod))
		return false;
	memcpy(mod, cls->str, ml);
	mod[ml] = '\0';
	return strcmp(mod, "builtins") && tpc_pickle_global_class(mod, name) != TPC_PICKLE_DANGEROUS;
}

int tpc__pickle_check_shape(const tpc_value *root, const tpc__pickle_shape *sh, tpc_err *e)
{
	int ret = 0;
	tpc__u64map done = {0};   /* node -> index into info */
	uint64_t (*info)[2] = NULL; /* depth, size */
	size_t ninfo = 0, icap = 0;
	sframe *st = NULL;
	size_t n = 0, cap = 0;
	if (sh->getattr_seen && is_getattr(root)) {
		ret = BAD(sh, e, "pickle result uses builtins.getattr other than as getattr(class, 'member') (a pickled enum member): refused, it can run code");
		goto out;
	}
	if (!tpc__pickle_has_children(root))
		goto out;
	if (tpc_grow((void **)&st, &cap, 1, sizeof(*st))) {
		ret = tpc_err_nomem(e);
		goto out;
	}
	st[n++] = (sframe){root, 0, 0, 1};
	while (n) {
		sframe *f = &st[n - 1];
		if (f->j < tpc_value_nchildren(f->v)) {
			size_t slot = f->j;
			const tpc_value *c = tpc_value_child(f->v, f->j++);
			uint64_t cd = 0, cs = 1, *at;
			if (sh->getattr_seen && ((is_getattr(c) && !(slot == 0 && enum_member(f->v))) ||
						(slot == 0 && f->v->kind == TPC_V_CALL && c->kind == TPC_V_CALL && c->n &&
						 is_getattr(c->items[0])))) {
				ret = BAD(sh, e, "pickle result uses builtins.getattr other than as getattr(class, 'member') (a pickled enum member): refused, it can run code");
				goto out;
			}
			if (c && tpc__pickle_has_children(c)) {
				at = c->refs == 1 ? NULL : tpc__u64map_get(&done, (uintptr_t)c);
				if (!at) {
					if (n >= sh->max_depth) {
						ret = BAD(sh, e, "pickle result nests deeper than %" PRIu64
							     " containers",
							  sh->max_depth);
						goto out;
					}
					if (tpc_grow((void **)&st, &cap, n + 1, sizeof(*st))) {
						ret = tpc_err_nomem(e);
						goto out;
					}
					st[n++] = (sframe){c, 0, 0, 1};
					continue;
				}
				cd = info[*at][0];
				cs = info[*at][1];
			}
			if (cd + 1 > f->depth)
				f->depth = cd + 1;
			f->size = f->size + cs < f->size ? UINT64_MAX : f->size + cs;
			continue;
		}
		if (f->size > sh->max_tree) {
			ret = BAD(sh, e, "pickle result expands to more than %" PRIu64
				     " values through shared subtrees",
				  sh->max_tree);
			goto out;
		}
		if (f->v->refs != 1) {
			if (tpc_grow((void **)&info, &icap, ninfo + 1, sizeof(*info)) ||
			    tpc__u64map_put(&done, (uintptr_t)f->v, ninfo)) {
				ret = tpc_err_nomem(e);
				goto out;
			}
			info[ninfo][0] = f->depth;
			info[ninfo][1] = f->size;
			ninfo++;
		}
		sframe fin = *f;
		n--;
		if (n) {
			sframe *p = &st[n - 1];
			if (fin.depth + 1 > p->depth)
				p->depth = fin.depth + 1;
			p->size = p->size + fin.size < p->size ? UINT64_MAX : p->size + fin.size;
		}
	}
out:
	free(st);
	free(info);
	tpc__u64map_release(&done);
	return ret;
}
