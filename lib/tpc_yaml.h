/*
 * tpc_yaml.h - the small subset of YAML that a merge recipe (mergekit's
 * config, `merge --recipe`) is written in, read into a cJSON tree.
 *
 * Read:
 *   block mappings      key: value            keys plain or quoted, unique
 *                       key:                  the value on the lines below,
 *                         nested: ...         more indented (a block sequence
 *                                             may sit at the key's indent)
 *   block sequences     - item                an item a scalar, a flow
 *                       - key: v              sequence, or a mapping whose
 *                         other: w            keys line up after "- "
 *   flow collections    [0, 0.5, 'a', [1]]    on one line, nested allowed
 *                       {weight: 0.5, density: [0.1, 1]}
 *   scalars             plain, 'single' ('' a quote), "double" (\\ \" \n
 *                       \t \/ escapes): null ~ -> null; true/false (and
 *                       True/TRUE...) -> a bool; a whole strtod number ->
 *                       a number; anything else a string (quoted: always)
 *   comments            '#' at a line's start or after a blank, outside quotes
 *   one "---" first line
 *
 * Refused by line (TPC_EINPUT, "'<path>': line N: ..."): tabs in
 * indentation, anchors (&), aliases (*), tags (!), block scalars (| >),
 * complex keys (?), directives (%), a second document, a flow collection
 * that does not close on its line, a duplicate key, a line indented where
 * nothing can start, more than 64 levels, text after a closing quote.
 * A missing document (only comments) is an empty mapping.
 */
#ifndef TPC_YAML_H
#define TPC_YAML_H

#include <stddef.h>

#include "tpc_err.h"

struct cJSON;

/* Parse `len` bytes of `text` (NUL bytes refused); `path` names it in
 * errors. *out: the tree (cJSON_Delete it). */
int tpc_yaml_from_buffer(const char *text, size_t len, const char *path, struct cJSON **out, tpc_err *e);
int tpc_yaml_from_file(const char *path, struct cJSON **out, tpc_err *e);

#endif
