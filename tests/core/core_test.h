/* core_test.h - what test_core.c and test_core_views.c share: the I/O
 * switches of their second run (core-direct-map, tests/meson.build). */
#ifndef TPC_CORE_TEST_H
#define TPC_CORE_TEST_H

#include "test_util.h"

#include "tpc_io.h"

/* the library reads no environment: the switches the core-direct-map
 * run sets come in the way cmd/main.c hands them down */
static inline void core_test_io_config(void)
{
	tpc_io_config c;
	tpc_io_config_defaults(&c);
	const char *s = getenv("TPCONV_DIRECT_STAGE");
	c.direct_stage = !(s && !strcmp(s, "0"));
	if ((s = getenv("TPCONV_DIRECT")) && (!strcmp(s, "0") || !strcmp(s, "1")))
		c.direct = s[0] - '0';
	tpc_io_configure(&c);
}

#endif
