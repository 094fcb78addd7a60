/* A program outside the tree that uses the installed libtpconv (found with
 * pkg-config) through the umbrella header only: it opens a checkpoint, walks
 * its tensors and metadata, reads every tensor's bytes in windows, and writes
 * a safetensors copy cast to bf16 through the format registry. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tpconv/tpconv.h>

static int fail(tpc_ckpt *ck, const tpc_err *e)
{
	char msg[2048];
	tpc_err_format(e, msg, sizeof(msg));
	fprintf(stderr, "consumer: %s\n", msg);
	tpc_ckpt_free(ck);
	return 1;
}

int main(int argc, char **argv)
{
	tpc_ckpt *ck = NULL;
	tpc_err e;
	unsigned char buf[4096];
	uint64_t bytes = 0, sum = 0;
	if (argc != 3)
		return 2;
	tpc_formats_register_all();
	tpc_err_init(&e);
	if (tpc_ckpt_load(&ck, argv[1], &e))
		return fail(ck, &e);
	for (size_t i = 0; i < tpc_ckpt_count(ck); i++) {
		const tpc_tensor *t = tpc_ckpt_tensor(ck, i);
		uint64_t n = tpc_tensor_nbytes(t), numel = 1;
		for (int d = 0; d < tpc_tensor_ndim(t); d++)
			numel *= (uint64_t)tpc_tensor_shape(t)[d];
		if (numel != tpc_tensor_numel(t) || n != numel * tpc_dtype_size(tpc_tensor_dtype(t)) ||
		    tpc_ckpt_find(ck, tpc_tensor_name(t)) != (int64_t)i) {
			fprintf(stderr, "consumer: tensor '%s' does not add up\n", tpc_tensor_name(t));
			return 1;
		}
		for (uint64_t off = 0; off < n; off += sizeof(buf)) {
			uint64_t len = n - off < sizeof(buf) ? n - off : sizeof(buf);
			if (tpc_ckpt_read_out(ck, t, off, len, buf, &e))
				return fail(ck, &e);
			for (uint64_t k = 0; k < len; k++)
				sum += buf[k];
			bytes += len;
		}
	}
	for (size_t i = 0; i < tpc_ckpt_meta_count(ck); i++)
		if (strcmp(tpc_ckpt_meta_get(ck, tpc_ckpt_meta_key(ck, i)), tpc_ckpt_meta_value(ck, i)))
			return 1;
	if (tpc_ckpt_cast(ck, tpc_dtype_parse("bf16"), &e) ||
	    tpc_ckpt_save(ck, argv[2], NULL, 0, &e))
		return fail(ck, &e);
	printf("%zu tensors, format %s, %llu bytes read\n", tpc_ckpt_count(ck), tpc_ckpt_format_name(ck),
	       (unsigned long long)bytes);
	fprintf(stderr, "consumer: byte sum %llu, tpconv %s\n", (unsigned long long)sum, tpc_version());
	tpc_ckpt_free(ck);
	return 0;
}
