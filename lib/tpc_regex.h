/*
 * tpc_regex.h - the one regular-expression dialect of tpconv: plan rules
 * ("match", "layers", "experts", stages), rules files (rename, drop,
 * select, unfuse, "when"/"unless") and --select all compile through
 * tpc_regex_compile, so a pattern means the same wherever it is written.
 *
 * The dialect is POSIX extended (glibc regcomp, REG_EXTENDED) plus Python's
 * \d and \D, which is what people copy from Python tools. Constructs POSIX
 * would misread rather than refuse are refused by name: (?...) groups and
 * lookaround, lazy quantifiers (*? +? ?? {}?). Patterns come from plans that
 * shard-set manifests carry and from rules files - untrusted input - so a
 * pattern too costly to compile (below) is refused before regcomp sees it.
 */
#ifndef TPC_REGEX_H
#define TPC_REGEX_H

#include <regex.h>
#include <stddef.h>
#include <stdint.h>

/* Compile `pat` (cflags: REG_EXTENDED is implied; add REG_NOSUB etc.).
 * Returns 0; 1 for a pattern refused, with the reason in why[n] (regerror's
 * text, the dialect's, or TPC_REGEX_TOO_COSTLY); -1 when out of memory. On
 * 0 the caller regfree()s re. */
int tpc_regex_compile(regex_t *re, const char *pat, int cflags, char *why, size_t n);

/*
 * How big a POSIX extended regular expression gets inside glibc's regcomp,
 * which copies the subexpression under every repetition: the number of atoms
 * after that expansion (a bracket expression is one atom). UINT64_MAX for a
 * pattern to refuse whatever its size: an interval bound over
 * TPC_REGEX_MAX_DUP (x{1,n} costs n^2 memory), a copying repetition (+,
 * {m,n}) of something that can match the empty string ("(x*)+", "x?+":
 * minutes in regcomp), a back-reference (\1..\9: exponential matching), or
 * groups nested deeper than 64. Callers refuse a
 * pattern whose cost is over TPC_REGEX_MAX_COST (a few tens of MB in regcomp
 * at most) with TPC_REGEX_TOO_COSTLY; malformed patterns are left to
 * regcomp's own error.
 */
#define TPC_REGEX_MAX_COST 10000u
#define TPC_REGEX_MAX_DUP 255 /* POSIX's RE_DUP_MAX minimum */
#define TPC_REGEX_TOO_COSTLY \
	"too costly to compile: nested or stacked repetitions, repeating what can match empty, an interval over {255}, or a back-reference"
uint64_t tpc_regex_cost(const char *pattern);

#endif
