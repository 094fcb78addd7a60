/*
 * tpconv.h - the libtpconv API: include this one header (installed as
 * <tpconv/tpconv.h>; link with `pkg-config --libs tpconv`).
 *
 * libtpconv reads model checkpoints in every format the tpconv command reads
 * (torch.save zip and legacy, safetensors and Hugging Face sharded folders,
 * GGUF, PyTorch DCP, DeepSpeed), lets a program list their tensors and
 * metadata and read tensor bytes in any dtype layout as C-contiguous
 * little-endian images, and writes them in any format through the same
 * registry the command uses, streaming from the input mapping.
 *
 *   tpconv_err.h    tpc_err, the status codes, tpc_err_format
 *   tpconv_dtype.h  tpc_dtype and its name, size, parse
 *   tpconv_ckpt.h   formats, loading, iterating, reading, casting, saving
 *   tpconv_api.h    TPC_API, the export mark
 *
 * Everything the library exports is declared in these headers and listed in
 * lib/libtpconv.map in the source tree; nothing else is exported. Sharding,
 * merging and verifying are in the tpconv command, not the library.
 *
 * The library never prints and never exits; every function that can fail
 * returns 0 or a negative tpc_status and fills the caller's tpc_err.
 */
#ifndef TPCONV_H
#define TPCONV_H

#include "tpconv_api.h"
#include "tpconv_ckpt.h"
#include "tpconv_dtype.h"
#include "tpconv_err.h"

#endif
