/* A program outside the tree that reads a checkpoint and writes a safetensors
 * copy through the installed libtpconv (found with pkg-config). */
#include <stdio.h>
#include <tpconv/formats.h>
#include <tpconv/tpc_ckpt.h>
#include <tpconv/tpc_format.h>

int main(int argc, char **argv)
{
	tpc_ckpt ck;
	tpc_err e;
	tpc_write_opts wo = {0};
	char msg[2048];
	if (argc != 3)
		return 2;
	tpc_formats_register_all();
	tpc_ckpt_init(&ck);
	tpc_err_init(&e);
	if (tpc_ckpt_open(&ck, argv[1], NULL, &e) ||
	    tpc_format_by_name("safetensors")->write(&ck, NULL, 0, argv[2], &wo, &e)) {
		tpc_err_format(&e, msg, sizeof(msg));
		fprintf(stderr, "consumer: %s\n", msg);
		tpc_ckpt_release(&ck);
		return 1;
	}
	printf("%zu tensors, format %s\n", ck.n, ck.format);
	tpc_ckpt_release(&ck);
	return 0;
}
