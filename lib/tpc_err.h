/*
 * tpc_err.h - error reporting for every tpconv module.
 *
 * Library code never prints and never exits. A function that can fail returns
 * 0 on success or a negative tpc_status, and fills a caller-provided tpc_err
 * with what went wrong: the status, the errno (or CUDA/NCCL status) that caused
 * it, the file, the byte offset inside that file, the tensor name, and a short
 * lowercase message. On success the error object is left untouched. There is
 * no global "last error".
 *
 * The first error recorded wins: tpc_err_set() on an object that already holds
 * an error keeps the original (a cleanup failure must not hide the real cause).
 *
 * Corrupt input is reported through TPC_CORRUPT(), the one place to put a
 * breakpoint when chasing a parser rejection (sqlite's SQLITE_CORRUPT_BKPT).
 *
 * The status doubles as the process exit code of the command line tool:
 * exit status = -status (see tpc_status_exit()).
 */
#ifndef TPC_ERR_H
#define TPC_ERR_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "tpconv_err.h" /* tpc_status, tpc_err, tpc_err_init, tpc_err_format */

/* Record an error (unless one is recorded already) and return `code`. */
int tpc_err_set(tpc_err *e, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
int tpc_err_setv(tpc_err *e, int code, const char *fmt, va_list ap);

/* Like tpc_err_set, with errno: the message gets ": <strerror>" appended. */
int tpc_err_sys(tpc_err *e, int code, int sys, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* Add context to a recorded error when the fields are still empty: callers
 * that know the file or tensor fill them in on the way out. */
/* Set an error (as tpc_err_set) naming a file and a tensor (either NULL). */
int tpc_err_at(tpc_err *e, int code, const char *path, const char *tensor, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
void tpc_err_path(tpc_err *e, const char *path);
void tpc_err_tensor(tpc_err *e, const char *name);
void tpc_err_offset(tpc_err *e, int64_t offset);

/* Corrupt-input report: file, offset (-1 if unknown), tensor (NULL if none). */
int tpc__corrupt(tpc_err *e, const char *where, const char *path, int64_t offset,
		 const char *tensor, const char *fmt, ...)
	__attribute__((format(printf, 6, 7)));
#define TPC_STR2(x) #x
#define TPC_STR(x) TPC_STR2(x)
#define TPC_CORRUPT(e, path, offset, tensor, ...)                                 \
	tpc__corrupt((e), __FILE__ ":" TPC_STR(__LINE__), (path), (offset), (tensor), \
		     __VA_ARGS__)

/* Out of memory: EIO with a fixed message. */
int tpc_err_nomem(tpc_err *e);

/* Exit status for a tpc_status (0..5). */
int tpc_status_exit(int status);

/* Copy `src` into `dst` (size n) replacing control bytes by '?'. */
void tpc_sanitize(char *dst, size_t n, const char *src);

#endif
