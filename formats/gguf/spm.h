/*
 * spm.h - SentencePiece's tokenizer.model: a ModelProto protobuf
 * (sentencepiece_model.proto, proto2), read for the GGUF vocabulary.
 *
 * Wire format (protobuf encoding): a message is a run of fields, each a
 * varint key (field number << 3 | wire type) then the value:
 *   0 varint (7 bits a byte, low first, high bit = more; at most 10 bytes)
 *   1 fixed64 (8 bytes LE)     2 length-delimited (varint length, bytes)
 *   5 fixed32 (4 bytes LE)     3/4 groups (deprecated; refused)
 * ModelProto:
 *   1 pieces (repeated SentencePiece, length-delimited):
 *       1 piece (string)  2 score (float, fixed32)
 *       3 type (enum, varint): 1 NORMAL (default) 2 UNKNOWN 3 CONTROL
 *         4 USER_DEFINED 5 UNUSED 6 BYTE
 *   2 trainer_spec, 3 normalizer_spec, 4 self_test_data, 5 denormalizer_spec
 *       (skipped by the reader: the converter reads pieces only)
 * What the writer (tpc_spm_to_buffer) puts in them, all the model needs to
 * tokenize as llama.cpp's SPM tokenizer does:
 *   TrainerSpec     3 model_type (varint: 1 UNIGRAM, 2 BPE)  4 vocab_size
 *                   35 byte_fallback (bool)  40 unk_id  41 bos_id  42 eos_id
 *                   43 pad_id (int32 varints; -1 none, as a 10-byte varint)
 *   NormalizerSpec  1 name (string)  3 add_dummy_prefix  4 remove_extra_
 *                   whitespaces  5 escape_whitespaces (bools)
 * Other and unknown fields are skipped by wire type. The last value of a
 * repeated scalar field wins, as protobuf's parser does.
 *
 * What SentencePieceProcessor::Load refuses is refused too: an empty piece,
 * a piece defined twice, no UNKNOWN piece or more than one. Pieces must be
 * UTF-8 (the converter encodes them as text) and a type outside 1..6 is
 * refused (protobuf would keep NORMAL; tpconv does not guess). Every
 * length is checked against the bytes left: errors name the file and the
 * byte offset (TPC_EINPUT, exit 3).
 */
#ifndef TPC_SPM_H
#define TPC_SPM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tpc_err.h"

enum {
	TPC_SPM_NORMAL = 1, TPC_SPM_UNKNOWN = 2, TPC_SPM_CONTROL = 3,
	TPC_SPM_USER_DEFINED = 4, TPC_SPM_UNUSED = 5, TPC_SPM_BYTE = 6
};

typedef struct tpc_spm_piece {
	char *s;       /* NUL-terminated copy (no NUL inside: UTF-8 checked) */
	uint32_t len;
	float score;
	int type;      /* TPC_SPM_* */
} tpc_spm_piece;

typedef struct tpc_spm {
	tpc_spm_piece *p;
	size_t n;
} tpc_spm;

/* Parse n bytes; `path` names the file in errors. On error *m is empty. */
int tpc_spm_from_buffer(const uint8_t *buf, size_t n, const char *path, tpc_spm *m, tpc_err *e);
int tpc_spm_from_file(const char *path, tpc_spm *m, tpc_err *e);
void tpc_spm_release(tpc_spm *m);

/* The spec fields the writer sets (see above); an id < 0 is "none". */
typedef struct tpc_spm_spec {
	int model_type; /* 1 UNIGRAM, 2 BPE */
	bool byte_fallback, add_dummy_prefix, remove_extra_whitespaces, escape_whitespaces;
	int32_t unk_id, bos_id, eos_id, pad_id;
	const char *normalizer; /* normalization_rule_name: "identity" */
} tpc_spm_spec;

/* A ModelProto holding m's pieces then the two specs, in *out (malloc'd,
 * *n bytes). m is checked as the reader checks a file (pieces UTF-8 and
 * not empty, one UNKNOWN, none twice), so what is written reads back;
 * `what` names the source in errors (TPC_EINPUT). */
int tpc_spm_to_buffer(const tpc_spm *m, const tpc_spm_spec *spec, const char *what, uint8_t **out, size_t *n,
		      tpc_err *e);

#endif
