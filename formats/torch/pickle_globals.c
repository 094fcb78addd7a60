/*
 * pickle_globals.c - the names a pickle's GLOBAL / STACK_GLOBAL opcodes ask for:
 * Python 2 names mapped as torch's unpickler maps them, and each global
 * classified safe, unknown or dangerous (torch's weights_only allow-list and
 * picklescan's deny-list; pickle.h says which is which). The VM (pickle.c)
 * records them; nothing here is ever called.
 */
#include "pickle.h"

#include <stdlib.h>
#include <string.h>

#include "tpc_util.h"

/* ---- global names ---- */

/* torch/_utils.py IMPORT_MAPPING / NAME_MAPPING (a safe subset of CPython's
 * _compat_pickle), plus `exceptions`, which CPython maps for its exception
 * names. */
static const char *const import_map[][2] = {
	{"__builtin__", "builtins"}, {"copy_reg", "copyreg"},   {"Queue", "queue"},
	{"repr", "reprlib"},         {"_abcoll", "collections.abc"},
	{"UserDict", "collections"}, {"UserList", "collections"},
	{"UserString", "collections"}, {"whichdb", "dbm"},       {"StringIO", "io"},
	{"cStringIO", "io"},         {"exceptions", "builtins"},
};

/* Python 2 module and name -> Python 3 (pickle's _compat_pickle NAME_MAPPING);
 * the writer maps back by the same rows, but for the three that are not one
 * to one (str, collections.UserDict and Exception keep other names). */
static const struct {
	const char *m2, *n2, *m3, *n3;
	bool one_way;
} name_map[] = {
	{"__builtin__", "xrange", "builtins", "range", false},
	{"__builtin__", "reduce", "functools", "reduce", false},
	{"__builtin__", "intern", "sys", "intern", false},
	{"__builtin__", "unichr", "builtins", "chr", false},
	{"__builtin__", "unicode", "builtins", "str", false},
	{"__builtin__", "long", "builtins", "int", false},
	{"__builtin__", "basestring", "builtins", "str", true},
	{"itertools", "izip", "builtins", "zip", false},
	{"itertools", "imap", "builtins", "map", false},
	{"itertools", "ifilter", "builtins", "filter", false},
	{"itertools", "ifilterfalse", "itertools", "filterfalse", false},
	{"itertools", "izip_longest", "itertools", "zip_longest", false},
	{"UserDict", "IterableUserDict", "collections", "UserDict", false},
	{"UserDict", "UserDict", "collections", "UserDict", true},
	{"UserList", "UserList", "collections", "UserList", false},
	{"UserString", "UserString", "collections", "UserString", false},
	{"exceptions", "StandardError", "builtins", "Exception", true},
};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

void tpc_pickle_map_name(const char **module, const char **name)
{
	for (size_t i = 0; i < COUNT(name_map); i++) {
		if (!strcmp(*module, name_map[i].m2) && !strcmp(*name, name_map[i].n2)) {
			*module = name_map[i].m3;
			*name = name_map[i].n3;
			return;
		}
	}
	for (size_t i = 0; i < COUNT(import_map); i++) {
		if (!strcmp(*module, import_map[i][0])) {
			*module = import_map[i][1];
			return;
		}
	}
}

void tpc_pickle_unmap_name(const char **module, const char **name)
{
	for (size_t i = 0; i < COUNT(name_map); i++) {
		if (!name_map[i].one_way && !strcmp(*module, name_map[i].m3) && !strcmp(*name, name_map[i].n3)) {
			*module = name_map[i].m2;
			*name = name_map[i].n2;
			return;
		}
	}
}

/* torch's weights_only allow-list (FORMATS.md §1.11, torch 2.x defaults). */
static const char *const safe_torch_names[] = {
	/* classes and helpers */
	"Size", "Tensor", "device",
	/* dtypes */
	"float32", "float64", "float16", "bfloat16", "int8", "int16", "int32", "int64", "uint8",
	"bool", "complex32", "complex64", "complex128", "float8_e5m2", "float8_e4m3fn",
	"float8_e5m2fnuz", "float8_e4m3fnuz", "float8_e8m0fnu", "float4_e2m1fn_x2", "bits8",
	"bits16", "bits1x8", "bits2x4", "bits4x2", "bcomplex32", "uint16", "uint32", "uint64",
	"uint1", "uint2", "uint3", "uint4", "uint5", "uint6", "uint7", "int1", "int2", "int3",
	"int4", "int5", "int6", "int7", "qint8", "quint8", "qint32", "quint4x2", "quint2x4",
	/* qschemes */
	"per_tensor_affine", "per_tensor_symmetric", "per_channel_affine",
	"per_channel_symmetric", "per_channel_affine_float_qparams",
};

/* Prefixes of torch._storage_classes / torch._tensor_classes names. */
static const char *const storage_types[] = {
	"Double", "Float", "Long", "Int", "Short", "Char", "Byte", "Half", "Bool",
	"QUInt8", "QInt8", "QInt32", "BFloat16", "ComplexFloat", "ComplexDouble",
	"QUInt4x2", "QUInt2x4",
};

static const char *const safe_pairs[][2] = {
	{"collections", "OrderedDict"},
	{"collections", "Counter"},
	{"torch.nn.parameter", "Parameter"},
	{"torch.serialization", "_get_layout"},
	{"_codecs", "encode"},
	{"builtins", "bytearray"},
	{"builtins", "set"},
	{"builtins", "complex"},
	{"torch.storage", "UntypedStorage"},
	{"torch.storage", "TypedStorage"},
	{"torch._utils", "_rebuild_parameter"},
	{"torch._utils", "_rebuild_parameter_with_state"},
	{"torch._utils", "_rebuild_qtensor"},
	{"torch._utils", "_rebuild_tensor"},
	{"torch._utils", "_rebuild_tensor_v2"},
	{"torch._utils", "_rebuild_tensor_v3"},
	{"torch._utils", "_rebuild_sparse_tensor"},
	{"torch._utils", "_rebuild_sparse_csr_tensor"},
	{"torch._utils", "_rebuild_meta_tensor_no_storage"},
	{"torch._utils", "_rebuild_nested_tensor"},
	{"torch._utils", "_rebuild_wrapper_subclass"},
	{"torch._utils", "_rebuild_device_tensor_from_numpy"},
	{"torch._utils", "_rebuild_device_tensor_from_cpu_tensor"},
	{"torch._tensor", "_rebuild_from_type_v2"},
};

/*
 * Modules where every name can reach code, the OS or the network (picklescan's
 * _unsafe_globals and friends). A submodule ("os.path") counts as its module.
 */
static const char *const dangerous_modules[] = {
	"os", "posix", "nt", "subprocess", "_posixsubprocess", "sys", "runpy", "socket",
	"_socket", "shutil", "pty", "commands", "webbrowser", "importlib", "imp", "marshal",
	"ctypes", "_ctypes", "code", "codeop", "pdb", "bdb", "asyncio", "multiprocessing",
	"pickle", "_pickle", "cPickle", "dill", "cloudpickle", "joblib", "timeit", "cProfile",
	"profile", "trace", "httplib", "http", "urllib", "urllib2", "requests", "aiohttp",
	"ftplib", "smtplib", "telnetlib", "venv", "ensurepip", "pip", "distutils",
	"setuptools", "zipimport", "pkgutil", "torch.hub", "torch.jit", "torch._inductor",
	"torch.utils.cpp_extension", "numpy.testing",
};

static const char *const dangerous_pairs[][2] = {
	{"builtins", "eval"},       {"builtins", "exec"},      {"builtins", "compile"},
	{"builtins", "open"},       {"builtins", "getattr"},   {"builtins", "setattr"},
	{"builtins", "delattr"},    {"builtins", "__import__"}, {"builtins", "apply"},
	{"builtins", "breakpoint"}, {"builtins", "input"},     {"builtins", "execfile"},
	{"builtins", "file"},       {"builtins", "reload"},    {"builtins", "globals"},
	{"builtins", "locals"},     {"builtins", "vars"},      {"builtins", "help"},
	{"operator", "attrgetter"}, {"operator", "methodcaller"}, {"functools", "partial"},
	{"types", "CodeType"},      {"types", "FunctionType"}, {"types", "MethodType"},
	{"io", "open"},             {"io", "FileIO"},          {"_io", "open"},
	{"_io", "FileIO"},          {"pydoc", "pipepager"},    {"pydoc", "locate"},
	{"torch", "load"},          {"torch.serialization", "load"},
	{"torch", "_load_global_deps"}, {"torch.storage", "_load_from_bytes"},
	{"numpy", "load"},          {"numpy.lib.npyio", "load"},
	{"platform", "popen"},      {"platform", "system"},
};

static bool module_in(const char *module, const char *m)
{
	size_t n = strlen(m);
	return !strncmp(module, m, n) && (module[n] == '\0' || module[n] == '.');
}

tpc_pickle_gclass tpc_pickle_global_class(const char *module, const char *name)
{
	if (!module || !name)
		return TPC_PICKLE_UNKNOWN;
	tpc_pickle_map_name(&module, &name);
	for (size_t i = 0; i < COUNT(dangerous_modules); i++)
		if (module_in(module, dangerous_modules[i]))
			return TPC_PICKLE_DANGEROUS;
	for (size_t i = 0; i < COUNT(dangerous_pairs); i++)
		if (!strcmp(module, dangerous_pairs[i][0]) && !strcmp(name, dangerous_pairs[i][1]))
			return TPC_PICKLE_DANGEROUS;
	for (size_t i = 0; i < COUNT(safe_pairs); i++)
		if (!strcmp(module, safe_pairs[i][0]) && !strcmp(name, safe_pairs[i][1]))
			return TPC_PICKLE_SAFE;
	if (!strcmp(module, "torch")) {
		for (size_t i = 0; i < COUNT(safe_torch_names); i++)
			if (!strcmp(name, safe_torch_names[i]))
				return TPC_PICKLE_SAFE;
	}
	if (!strcmp(module, "torch") || !strcmp(module, "torch.cuda")) {
		for (size_t i = 0; i < COUNT(storage_types); i++) {
			size_t l = strlen(storage_types[i]);
			if (!strncmp(name, storage_types[i], l) &&
			    (!strcmp(name + l, "Storage") || !strcmp(name + l, "Tensor")))
				return TPC_PICKLE_SAFE;
		}
	}
	return TPC_PICKLE_UNKNOWN;
}

const char *tpc_pickle_gclass_name(tpc_pickle_gclass c)
{
	switch (c) {
	case TPC_PICKLE_SAFE:
		return "safe";
	case TPC_PICKLE_DANGEROUS:
		return "dangerous";
	default:
		return "unknown";
	}
}

void tpc_pickle_globals_release(tpc_pickle_globals *g)
{
	if (!g)
		return;
	for (size_t i = 0; i < g->n; i++) {
		free(g->v[i].module);
		free(g->v[i].name);
	}
	free(g->v);
	if (g->index) {
		tpc__strmap_release(g->index);
		free(g->index);
	}
	memset(g, 0, sizeof(*g));
}

void tpc_pickle_opts_init(tpc_pickle_opts *o)
{
	memset(o, 0, sizeof(*o));
}
