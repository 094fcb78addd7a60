/* formats.c - registers every format with the registry in lib/. */
#include "formats.h"
#include "ds_universal.h"

void tpc_formats_register_all(void)
{
	tpc_format_register(&tpc_fmt_safetensors);
	tpc_format_register(&tpc_fmt_hf_index);
	tpc_format_register(&tpc_fmt_torch);
	tpc_format_register(&tpc_fmt_dcp);
	tpc_format_register(&tpc_fmt_deepspeed);
	tpc_format_register(&tpc_fmt_ds_universal);
	tpc_format_register(&tpc_fmt_gguf);
}
