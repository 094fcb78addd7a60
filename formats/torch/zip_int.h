/*
 * zip_int.h - what zip.c (the reader) and zip_write.c (the layout and the
 * writer) share, private to the two: the record signatures, fixed lengths,
 * saturation markers and flags of tpc_zip.h's byte layout.
 */
#ifndef TPC_ZIP_INT_H
#define TPC_ZIP_INT_H

#include "tpc_zip.h"

#define SIG_LOCAL 0x04034b50u
#define SIG_CENTRAL 0x02014b50u
#define SIG_DESC 0x08074b50u
#define SIG_EOCD 0x06054b50u
#define SIG_EOCD64 0x06064b50u
#define SIG_LOC64 0x07064b50u

#define LOCAL_LEN 30u
#define CENTRAL_LEN 46u
#define EOCD_LEN 22u
#define EOCD64_LEN 56u
#define LOC64_LEN 20u

#define U32_SAT 0xFFFFFFFFu
#define U16_SAT 0xFFFFu

#define FLAG_ENCRYPTED 0x0001u
#define FLAG_DESCRIPTOR 0x0008u
#define FLAG_STRONG_ENC 0x0040u
#define FLAG_UTF8 0x0800u

/* Entry names can be 64 KiB; keep the end of a message (the offsets) visible. */
#define NAMEF "%.200s"

typedef unsigned long long ull;

#endif
