/*
 * tpconv_api.h - what libtpconv.so exports.
 *
 * The shared library is built with hidden symbol visibility: every function
 * of lib/ and formats/ is private to it unless its declaration carries
 * TPC_API. The names so marked, and only they, are listed in
 * lib/libtpconv.map, the linker version script the library is linked with;
 * tests/pkgconfig checks that the installed library exports exactly that
 * list and that the TPC_API marks agree with it. To add a function to the
 * public API: mark its declaration TPC_API, declare it in tpconv.h (or an
 * installed header it includes), add its name to lib/libtpconv.map.
 *
 * cmd/, shard/, verify/ and the tests link the internal static libraries,
 * where visibility changes nothing: they may use any function.
 */
#ifndef TPCONV_API_H
#define TPCONV_API_H

#if defined(__GNUC__) || defined(__clang__)
#define TPC_API __attribute__((visibility("default")))
#else
#define TPC_API
#endif

#endif
