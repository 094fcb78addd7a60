/* tpc_regex.c - the pattern dialect and its cost guard (tpc_regex.h). */
#include "tpc_regex.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpc_buf.h"

/*
 * Rewrite a Python-flavoured pattern into POSIX ERE: \d and \D become bracket
 * expressions; constructs that POSIX would misread instead of refusing
 * ((?...) groups, lazy quantifiers) are errors. Bracket expressions are
 * copied untouched (backslash is literal there in POSIX).
 */
static int translate_re(const char *pat, tpc_buf *out, const char **why)
{
	const char *p = pat;
	while (*p) {
		if (*p == '[') {
			const char *q = p + 1;
			if (*q == '^')
				q++;
			if (*q == ']')
				q++;
			while (*q && *q != ']') {
				if (*q == '[' && (q[1] == ':' || q[1] == '.' || q[1] == '=')) {
					char c = q[1];
					const char *end = q + 2;
					while (*end && !(end[0] == c && end[1] == ']'))
						end++;
					if (!*end) {
						*why = "unterminated [: :] class";
						return -1;
					}
					q = end + 2;
					continue;
				}
				q++;
			}
			if (!*q) {
				*why = "unterminated [ ] bracket expression";
				return -1;
			}
			tpc_buf_add(out, p, (size_t)(q + 1 - p));
			p = q + 1;
			continue;
		}
		if (*p == '\\') {
			if (!p[1]) {
				*why = "trailing backslash";
				return -1;
			}
			if (p[1] == 'd')
				tpc_buf_adds(out, "[0-9]");
			else if (p[1] == 'D')
				tpc_buf_adds(out, "[^0-9]");
			else
				tpc_buf_add(out, p, 2);
			p += 2;
			continue;
		}
		if (*p == '(' && p[1] == '?') {
			*why = "(?...) groups and lookaround are not POSIX extended regular expressions";
			return -1;
		}
		if ((*p == '*' || *p == '+' || *p == '?' || *p == '}') && p[1] == '?') {
			*why = "lazy quantifiers (*? +? ?? {}?) are not POSIX extended regular expressions";
			return -1;
		}
		tpc_buf_addc(out, *p++);
	}
	return 0;
}

/*
 * glibc's regcomp copies the subexpression under a repetition (x+ becomes
 * x x*, x{m,n} n copies), so stacked or nested repetitions grow the compiled
 * form exponentially: "([0-9]+)" followed by 22 '+' takes 400 MB, and
 * "((a{1,100}){1,100}){1,10}" 8 GB; one interval x{1,n} grows as n^2
 * ("a{1,9999}": 790 MB). Copies of a subexpression that can match the empty
 * string are far worse: "x?++++*++++++++*" and ten nested "(...x*)+" take
 * minutes. Back-references make regexec exponential in the name's length.
 * Patterns come in plans, which shard-set manifests carry, and in rules
 * files: untrusted input. See tpc_util.h.
 *
 * The walk keeps, per open group, the atoms so far (sum), whether the
 * current branch can match empty without its last item (seq) and whether an
 * earlier branch can (alt); for the last item, its atoms and nullability.
 */
#define RE_MAX_DEPTH 64
uint64_t tpc_regex_cost(const char *p)
{
	uint64_t sum[RE_MAX_DEPTH + 1], last = 0, copies;
	bool seq[RE_MAX_DEPTH + 1], alt[RE_MAX_DEPTH + 1], last_null = true;
	int depth = 0;
	sum[0] = 0;
	seq[0] = true;
	alt[0] = false;
	for (; *p; p++) {
		bool null = false; /* the new atom's nullability */
		switch (*p) {
		case '(':
			if (++depth > RE_MAX_DEPTH)
				return UINT64_MAX;
			seq[depth - 1] = seq[depth - 1] && last_null;
			sum[depth] = 0;
			seq[depth] = true;
			alt[depth] = false;
			last = 0;
			last_null = true;
			continue;
		case ')':
			if (depth) {
				bool g = alt[depth] || (seq[depth] && last_null);
				last = sum[depth--];
				sum[depth] += last;
				last_null = g;
				goto check;
			}
			break; /* a literal ')' */
		case '|':
			alt[depth] = alt[depth] || (seq[depth] && last_null);
			seq[depth] = true;
			last = 0;
			last_null = true;
			continue;
		case '*':
		case '?':
			last_null = true; /* one loop node over x: no copy */
			continue;
		case '+':
			copies = 2;
			goto repeat;
		case '{': {
			uint64_t m = 0, n = 0;
			char *end;
			if (!strchr(p, '}'))
				break; /* not an interval: a literal '{' */
			m = strtoull(p + 1, &end, 10);
			n = m;
			if (*end == ',')
				n = end[1] == '}' ? m + 1 : strtoull(end + 1, &end, 10);
			if (n > TPC_REGEX_MAX_DUP || m > TPC_REGEX_MAX_DUP)
				return UINT64_MAX; /* the copies nest: n^2 memory */
			copies = n > m ? n : m;
			while (*p != '}')
				p++;
			if (copies > 1) {
				if (last_null)
					return UINT64_MAX; /* copies of something that can match empty */
				sum[depth] += last * (copies - 1);
				last *= copies;
			}
			if (m == 0)
				last_null = true;
			goto check;
		}
		case '^':
		case '$':
			null = true; /* anchors match the empty string */
			break;
		case '\\':
			if (p[1] >= '1' && p[1] <= '9')
				return UINT64_MAX; /* back-references make matching exponential */
			if (p[1])
				p++;
			break;
		case '[':
			/* a bracket expression is one atom: "[]a]", "[^]a]", "[[:alpha:]]" */
			p++;
			if (*p == '^')
				p++;
			if (*p == ']')
				p++;
			while (*p && *p != ']') {
				if (p[0] == '[' && (p[1] == ':' || p[1] == '.' || p[1] == '=')) {
					char c = p[1];
					for (p += 2; *p && !(p[0] == c && p[1] == ']'); p++)
						;
					if (!*p)
						return 0;
					p++;
				}
				p++;
			}
			if (!*p)
				return 0; /* unterminated: regcomp says so */
			break;
		default:
			break;
		}
		/* an atom: the item before it is final */
		seq[depth] = seq[depth] && last_null;
		last = 1;
		last_null = null;
		sum[depth] += 1;
		goto check;
	repeat:
		if (copies > 1) {
			if (last_null)
				return UINT64_MAX; /* copies of something that can match empty */
			sum[depth] += last * (copies - 1);
			last *= copies;
		}
	check:
		if (sum[depth] > TPC_REGEX_MAX_COST || last > TPC_REGEX_MAX_COST)
			return UINT64_MAX;
	}
	return sum[0];
}

int tpc_regex_compile(regex_t *re, const char *pat, int cflags, char *why, size_t n)
{
	tpc_buf b = TPC_BUF_INIT;
	const char *reason = NULL;
	int ret = 0;
	if (translate_re(pat, &b, &reason)) {
		snprintf(why, n, "%s", reason);
		ret = 1;
		goto out;
	}
	tpc_buf_addc(&b, '\0'); /* an empty pattern still needs a string */
	if (b.oom) {
		ret = -1;
		goto out;
	}
	if (tpc_regex_cost(b.p) > TPC_REGEX_MAX_COST) {
		snprintf(why, n, "%s", TPC_REGEX_TOO_COSTLY);
		ret = 1;
		goto out;
	}
	int rc = regcomp(re, b.p, cflags | REG_EXTENDED);
	if (rc) {
		regerror(rc, re, why, n);
		ret = rc == REG_ESPACE ? -1 : 1;
	}
out:
	tpc_buf_release(&b);
	return ret;
}
