/* tpc_err.c - the error object; see tpc_err.h. */
#include "tpc_err.h"
#include "tpc_util.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

void tpc_err_init(tpc_err *e)
{
	if (!e)
		return;
	memset(e, 0, sizeof(*e));
	e->offset = -1;
}

static void copy_str(char *dst, size_t n, const char *src)
{
	if (!src) {
		dst[0] = '\0';
		return;
	}
	size_t l = strlen(src);
	if (l >= n)
		l = n - 1;
	memcpy(dst, src, l);
	dst[l] = '\0';
}

/* The first error wins: e takes code and the message unless it holds an
 * error already; true when it took them. */
static bool set_first(tpc_err *e, int code, const char *fmt, va_list ap)
{
	if (!e || e->code != 0)
		return false;
	e->code = code;
	vsnprintf(e->msg, sizeof(e->msg), fmt, ap); /* truncation is acceptable here */
	return true;
}

int tpc_err_setv(tpc_err *e, int code, const char *fmt, va_list ap)
{
	set_first(e, code, fmt, ap);
	return code;
}

int tpc_err_set(tpc_err *e, int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	tpc_err_setv(e, code, fmt, ap);
	va_end(ap);
	return code;
}

int tpc_err_sys(tpc_err *e, int code, int sys, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	bool set = set_first(e, code, fmt, ap);
	va_end(ap);
	if (set && (e->sys = sys) != 0) {
		size_t l = strlen(e->msg);
		snprintf(e->msg + l, sizeof(e->msg) - l, ": %s", strerror(sys));
	}
	return code;
}

int tpc_err_at(tpc_err *e, int code, const char *path, const char *tensor, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	tpc_err_setv(e, code, fmt, ap);
	va_end(ap);
	tpc_err_path(e, path);
	tpc_err_tensor(e, tensor);
	return code;
}

void tpc_err_path(tpc_err *e, const char *path)
{
	if (e && e->code && !e->path[0] && path)
		copy_str(e->path, sizeof(e->path), path);
}

void tpc_err_tensor(tpc_err *e, const char *name)
{
	if (e && e->code && !e->tensor[0] && name)
		copy_str(e->tensor, sizeof(e->tensor), name);
}

void tpc_err_offset(tpc_err *e, int64_t offset)
{
	if (e && e->code && e->offset < 0)
		e->offset = offset;
}

int tpc__corrupt(tpc_err *e, const char *where, const char *path, int64_t offset,
		 const char *tensor, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	bool set = set_first(e, TPC_EINPUT, fmt, ap);
	va_end(ap);
	if (set) {
		e->where = where;
		e->offset = offset;
		copy_str(e->path, sizeof(e->path), path);
		copy_str(e->tensor, sizeof(e->tensor), tensor);
	}
	return TPC_EINPUT;
}

int tpc_err_nomem(tpc_err *e)
{
	return tpc_err_sys(e, TPC_EIO, ENOMEM, "out of memory");
}

void tpc_sanitize(char *dst, size_t n, const char *src)
{
	size_t i = 0;
	if (!n)
		return;
	for (; src && src[i] && i + 1 < n; i++) {
		unsigned char c = (unsigned char)src[i];
		dst[i] = (c < 0x20 || c == 0x7f) ? '?' : (char)c;
	}
	dst[i] = '\0';
}

void tpc_err_format(const tpc_err *e, char *buf, size_t n)
{
	char p[TPC_ERR_PATH_MAX], t[TPC_ERR_NAME_MAX], m[TPC_ERR_MSG_MAX];
	size_t len = 0;
	if (!n)
		return;
	buf[0] = '\0';
	if (!e || !e->code) {
		snprintf(buf, n, "no error");
		return;
	}
	tpc_sanitize(p, sizeof(p), e->path);
	tpc_sanitize(t, sizeof(t), e->tensor);
	tpc_sanitize(m, sizeof(m), e->msg);
#define ADD(...) tpc_appendf(buf, n, &len, __VA_ARGS__)
	if (p[0])
		ADD("'%s': ", p);
	if (t[0])
		ADD("tensor '%s': ", t);
	ADD("%s", m);
	if (e->offset >= 0)
		ADD(" (at byte offset %lld, 0x%llx)", (long long)e->offset,
		    (unsigned long long)e->offset);
#undef ADD
	if (len >= n && n > 4)
		memcpy(buf + n - 4, "...", 4);
}

int tpc_status_exit(int status)
{
	if (status >= 0)
		return 0;
	if (status < TPC_EGPU)
		return 4;
	return -status;
}
