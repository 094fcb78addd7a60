/*
 * tpconv_err.h - how libtpconv reports errors (installed as <tpconv/tpconv_err.h>).
 *
 * A function that can fail returns 0 or a negative tpc_status and fills a
 * tpc_err the caller provides: the status, the errno behind it, the file, the
 * byte offset in that file, the tensor, and a lowercase message. On success
 * the object is left untouched; the first error recorded wins. The library
 * never prints and never exits, and keeps no global "last error".
 *
 * The struct is visible, not opaque: the caller owns it (on the stack, one per
 * call chain) and may read its fields. tpc_err_format renders it as one line.
 */
#ifndef TPCONV_ERR_H
#define TPCONV_ERR_H

#include <stddef.h>
#include <stdint.h>

#include "tpconv_api.h"

typedef enum tpc_status {
	TPC_OK = 0,
	TPC_EMISMATCH = -1, /* verify found differences           -> exit 1 */
	TPC_EUSAGE = -2,    /* bad command line or plan usage      -> exit 2 */
	TPC_EINPUT = -3,    /* bad, corrupt or unsupported input   -> exit 3 */
	TPC_EIO = -4,       /* output or I/O failure, out of memory -> exit 4 */
	TPC_EGPU = -5,      /* GPU / NCCL / MPI failure            -> exit 5 */
} tpc_status;

#define TPC_ERR_PATH_MAX 1024
#define TPC_ERR_NAME_MAX 512
#define TPC_ERR_MSG_MAX 1024

typedef struct tpc_err {
	int code;        /* a tpc_status; 0 while no error is recorded */
	int sys;         /* errno, CUDA or NCCL status; 0 when none */
	int64_t offset;  /* byte offset in `path` where the problem is; -1 if none */
	char path[TPC_ERR_PATH_MAX];   /* file concerned; "" if none */
	char tensor[TPC_ERR_NAME_MAX]; /* tensor concerned; "" if none */
	char msg[TPC_ERR_MSG_MAX];     /* lowercase, no trailing period */
	const char *where;             /* source file:line that detected it */
} tpc_err;

/* Clear to "no error". Call once before handing the object to the library. */
TPC_API void tpc_err_init(tpc_err *e);

/*
 * Render the error as one line without the "tpconv: error: " prefix:
 *   'model.pt': tensor 'h.0.w': data ends at 0x1f400 but the file ends at 0x1e000 (offset 0x48)
 * Control characters from file contents are written as '?'. Always NUL
 * terminates; truncates with "..." when the buffer is too small.
 */
TPC_API void tpc_err_format(const tpc_err *e, char *buf, size_t n);

#endif
