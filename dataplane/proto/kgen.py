#!/usr/bin/env python3
"""kgen.py: generate kmsg.h and kmsg.c from Kafka's JSON message schemas.

Usage: kgen.py --header OUT.h --source OUT.c SCHEMA.json...
       kgen.py --kerr-header kerr.h --kerr-source kerr.c --errors errors.txt SCHEMA.json...

For each message (request, response or data schema) it writes one C struct per
struct in the schema, named <Message> and <Message>_<Type>, with the fields named as
in the JSON, plus the field tables (struct kfield / struct kschema, see kcodec.h)
that kcodec.c interprets, typed wrappers <Message>_decode/_encode/_size, the API
table behind kapi_info(), and a request dispatcher for fuzzers and tools.

The second form writes the one vocabulary of Kafka numbers the rest of the tree
uses: enum kerr (every error code by its Kafka name, from errors.txt) and enum kapi
(every api key of the request schemas, by Kafka's ApiKeys name), with kerr_name()
and kapi_name() for logs. It is a separate target so that pure-logic folders
(txn/) get the names without linking the codec.

Standard library only: it runs at build time on a bare Debian.
"""
import argparse
import json
import os
import re
import sys

VERSION_MAX = 0x7FFF
DEPTH_MAX = 8  # KCODEC_DEPTH_MAX in kcodec.h

PRIMS = {
    # json type: (C type, enum ktype)
    "bool": ("bool", "KT_BOOL"),
    "int8": ("int8_t", "KT_INT8"),
    "int16": ("int16_t", "KT_INT16"),
    "uint16": ("uint16_t", "KT_UINT16"),
    "int32": ("int32_t", "KT_INT32"),
    "int64": ("int64_t", "KT_INT64"),
    "float64": ("double", "KT_FLOAT64"),
    "uuid": ("uint8_t", "KT_UUID"),
    "string": ("struct kstr", "KT_STRING"),
    "bytes": ("struct kbytes", "KT_BYTES"),
    "records": ("struct kbytes", "KT_RECORDS"),
}
INT_TYPES = {"int8", "int16", "uint16", "int32", "int64"}


class SchemaError(Exception):
    pass


def load(path):
    """Kafka schemas are JSON with whole-line // comments."""
    with open(path, encoding="utf-8") as f:
        text = "".join(l for l in f if not l.lstrip().startswith("//"))
    return json.loads(text)


def vrange(spec, what):
    """'3+', '0-4', '5', 'none' -> (lo, hi); empty is (1, 0)."""
    if spec is None or spec == "none":
        return (1, 0)
    m = re.fullmatch(r"(\d+)\+", spec)
    if m:
        return (int(m.group(1)), VERSION_MAX)
    m = re.fullmatch(r"(\d+)-(\d+)", spec)
    if m:
        return (int(m.group(1)), int(m.group(2)))
    if re.fullmatch(r"\d+", spec):
        return (int(spec), int(spec))
    raise SchemaError(f"{what}: bad version range {spec!r}")


def cvr(r):
    lo, hi = r
    if lo > hi:
        return "KV_NONE"
    return "{ %d, %s }" % (lo, "KVERSION_MAX" if hi == VERSION_MAX else str(hi))


def vrtext(r):
    lo, hi = r
    if lo > hi:
        return "none"
    if hi == VERSION_MAX:
        return f"{lo}+"
    return f"{lo}" if lo == hi else f"{lo}-{hi}"


def c_int(v):
    if v == -(2**63):
        return "INT64_MIN"
    return f"INT64_C({v})"


class Struct:
    def __init__(self, cname, fields):
        self.cname = cname  # C struct name without "struct "
        self.fields = fields  # list of Field


class Field:
    pass


class Message:
    def __init__(self, path):
        j = load(path)
        self.name = j["name"]
        self.kind = j["type"]
        self.api_key = j.get("apiKey", -1)
        self.valid = vrange(j["validVersions"], self.name)
        self.flexible = vrange(j.get("flexibleVersions", "none"), self.name)
        self.common = {c["name"]: c for c in j.get("commonStructs", [])}
        self.structs = []  # in definition order: children before parents
        self.by_type = {}  # json type name -> Struct
        if self.kind == "header":
            return  # hand-written in kwire.c: its ClientId ignores the flexible encoding
        self.root = self.build_struct(self.name, j["fields"], depth=1)

    def struct_for(self, f, depth):
        """The Struct behind a struct-typed field: inline fields or a commonStruct."""
        tname = f["type"][2:] if f["type"].startswith("[]") else f["type"]
        if "fields" in f:
            if tname in self.by_type:
                raise SchemaError(f"{self.name}: struct {tname} defined twice")
            return self.build_struct(f"{self.name}_{tname}", f["fields"], depth + 1, tname)
        if tname in self.by_type:
            return self.by_type[tname]
        if tname in self.common:
            return self.build_struct(f"{self.name}_{tname}", self.common[tname]["fields"],
                                     depth + 1, tname)
        raise SchemaError(f"{self.name}: unknown struct type {tname}")

    def build_struct(self, cname, jfields, depth, tname=None):
        if depth > DEPTH_MAX:
            raise SchemaError(f"{cname}: nesting deeper than {DEPTH_MAX}")
        fields = []
        last_tag = -1
        for jf in jfields:
            fields.append(self.build_field(cname, jf, depth))
            fl = fields[-1]
            if fl.tag >= 0:
                if fl.tag <= last_tag:
                    raise SchemaError(f"{cname}.{fl.name}: tags must increase in field order")
                last_tag = fl.tag
                if fl.tagged[0] <= fl.tagged[1] and fl.tagged[0] < self.flexible[0]:
                    raise SchemaError(f"{cname}.{fl.name}: tagged in a non-flexible version")
        s = Struct(cname, fields)
        self.structs.append(s)
        if tname is not None:
            self.by_type[tname] = s
        return s

    def build_field(self, owner, jf, depth):
        f = Field()
        f.name = jf["name"]
        what = f"{owner}.{f.name}"
        t = jf["type"]
        f.versions = vrange(jf.get("versions"), what)
        f.nullable = vrange(jf.get("nullableVersions", "none"), what)
        f.tag = int(jf.get("tag", -1))
        f.tagged = vrange(jf.get("taggedVersions", "none"), what) if f.tag >= 0 else (1, 0)
        if "flexibleVersions" in jf:
            raise SchemaError(f"{what}: field-level flexibleVersions is not supported")
        f.is_array = t.startswith("[]")
        base = t[2:] if f.is_array else t
        f.sub = None
        if base in PRIMS:
            f.ctype, f.ktype = PRIMS[base]
        else:
            f.sub = self.struct_for(jf, depth)
            f.ctype, f.ktype = f"struct {f.sub.cname}", "KT_STRUCT"
            if not f.is_array and f.nullable[0] <= f.nullable[1]:
                raise SchemaError(f"{what}: nullable structs are not supported")
        f.base = base
        f.idef, f.fdef, f.def_null = 0, 0.0, False
        d = jf.get("default")
        if d is not None:
            d = str(d)
            if f.is_array or base in ("string", "bytes", "records"):
                if d == "null":
                    if f.nullable[0] > f.nullable[1]:
                        raise SchemaError(f"{what}: null default on a non-nullable field")
                    f.def_null = True
                elif d != "":
                    raise SchemaError(f"{what}: only null or empty defaults are supported")
            elif base == "bool":
                if d.lower() not in ("true", "false"):
                    raise SchemaError(f"{what}: bad bool default {d!r}")
                f.idef = 1 if d.lower() == "true" else 0
            elif base in INT_TYPES:
                f.idef = int(d, 0)
            elif base == "float64":
                f.fdef = float(d)
            else:
                raise SchemaError(f"{what}: default not supported for {t}")
        return f


def decl(f):
    """The C member declaration(s) for a field."""
    if f.is_array:
        ptr = f"uint8_t (*{f.name})[KWIRE_UUID_BYTES]" if f.base == "uuid" else f"{f.ctype} *{f.name}"
        return [f"int32_t {f.name}_n;", f"{ptr};"]
    if f.base == "uuid":
        return [f"uint8_t {f.name}[KWIRE_UUID_BYTES];"]
    return [f"{f.ctype} {f.name};"]


def note(f):
    parts = [vrtext(f.versions)]
    if f.nullable[0] <= f.nullable[1]:
        parts.append("nullable " + vrtext(f.nullable))
    if f.tag >= 0:
        parts.append(f"tag {f.tag} in {vrtext(f.tagged)}")
    if f.def_null:
        parts.append("default null")
    elif f.idef:
        parts.append(f"default {f.idef}")
    return ", ".join(parts)


PRIM_WIRE_MIN = {
    # json type: (fewest wire bytes, in a non-flexible version, in a flexible one)
    "bool": (1, 1), "int8": (1, 1), "int16": (2, 2), "uint16": (2, 2), "int32": (4, 4),
    "int64": (8, 8), "float64": (8, 8), "uuid": (16, 16),
    "string": (2, 1), "bytes": (4, 1), "records": (4, 1),
}


def in_range(r, v):
    return r[0] <= v <= r[1]


def wire_min(s, v, flex):
    """The fewest bytes struct s takes on the wire at version v (tagged fields: none)."""
    n = 1 if flex else 0   # the tagged-field count
    for f in s.fields:
        if not in_range(f.versions, v) or (flex and f.tag >= 0 and in_range(f.tagged, v)):
            continue
        if f.is_array:
            n += 1 if flex else 4
        elif f.sub is not None:
            n += wire_min(f.sub, v, flex)
        else:
            n += PRIM_WIRE_MIN[f.base][1 if flex else 0]
    return n


def request_arrays(m):
    """[(field path, C element size expression, fewest wire bytes of an element in any
    version the array exists in)] for every array of request m."""
    out = {}

    def walk(s, path, v, flex):
        for f in s.fields:
            if not in_range(f.versions, v):
                continue
            if f.is_array:
                if f.sub is not None:
                    size, w = f"sizeof(struct {f.sub.cname})", wire_min(f.sub, v, flex)
                else:
                    size = "KWIRE_UUID_BYTES" if f.base == "uuid" else f"sizeof({f.ctype})"
                    w = PRIM_WIRE_MIN[f.base][1 if flex else 0]
                key = path + f.name
                # n <= the bytes left (kr_array_len): an element costs a byte at least.
                w = max(w, 1)
                out[key] = (size, min(w, out.get(key, (size, w))[1]))
            if f.sub is not None:
                walk(f.sub, path + f.name + "_", v, flex)

    for v in range(m.valid[0], m.valid[1] + 1):
        walk(m.root, "", v, in_range(m.flexible, v))
    return sorted((k, size, w) for k, (size, w) in out.items())


def emit_header(msgs, out):
    w = out.append
    w("/* kmsg.h: GENERATED by dataplane/proto/kgen.py from the JSON schemas in")
    w(" * dataplane/proto/schema/ (Apache Kafka 3.7.1). Do not edit: change the generator.")
    w(" *")
    w(" * Every struct here is plain data for any core: strings and bytes point into the")
    w(" * decoded frame, arrays into the arena passed to <Msg>_decode. <Name>_n = -1 is a")
    w(" * null array. Member comments give the versions a field exists in.")
    w(" * Start a message to encode with <Struct>_init (every struct has one, array")
    w(" * elements too): it sets each field's schema default, which matters for tagged")
    w(" * fields (written only when not default) and for -1 defaults such as")
    w(" * LogAppendTimeMs. A memset struct is valid but holds zeros, not defaults.")
    w(" *   int <Msg>_decode(r, version, out, arena): 0, -EBADMSG or -ENOMEM")
    w(" *   int <Msg>_encode(w, version, in): 0, -ENOSPC or -EINVAL")
    w(" *   size_t <Msg>_size(version, in): exact bytes _encode writes")
    w(" */")
    w("#ifndef SLUICE_KMSG_H")
    w("#define SLUICE_KMSG_H")
    w("")
    w('#include "kcodec.h"')
    w("")
    for m in msgs:
        head = f"/* {m.name}: "
        if m.api_key >= 0:
            head += f"api key {m.api_key}, "
        head += f"versions {vrtext(m.valid)}, flexible {vrtext(m.flexible)}. */"
        w(head)
        for s in m.structs:
            w(f"struct {s.cname} {{")
            if not s.fields:
                w("\tuint8_t unused_; /* no fields in any version */")
            for f in s.fields:
                lines = decl(f)
                for i, l in enumerate(lines):
                    w(f"\t{l}" + (f" /* {note(f)} */" if i == len(lines) - 1 else ""))
            w("};")
            w(f"extern const struct kschema kschema_{s.cname};")
            w(f"static inline void {s.cname}_init(struct {s.cname} *m)")
            w(f"{{\n\tkcodec_defaults(&kschema_{s.cname}, m);\n}}")
        n = m.name
        w(f"int {n}_decode(struct kreader *r, int16_t version, struct {n} *out, struct karena *a);")
        w(f"int {n}_encode(struct kwriter *w, int16_t version, const struct {n} *in);")
        w(f"size_t {n}_size(int16_t version, const struct {n} *in);")
        w("")
    reqs = [m for m in msgs if m.kind == "request"]
    w("/* Every array of every request: X(message, field path, decoded element bytes, fewest")
    w(" * wire bytes of an element in any version), so that what a frame decodes to per")
    w(" * wire byte can be asserted where the decode arena is sized (dataplane/conn/conn.c). */")
    w("#define KMSG_REQUEST_ARRAYS(X) \\")
    for m in reqs:
        for path, size, wmin in request_arrays(m):
            w(f"\tX({m.name}, {path}, {size}, {wmin}) \\")
    w("\t/* end */")
    w("/* The same fewest wire bytes, by name, for bounds on what handlers allocate per element. */")
    for m in reqs:
        for path, _size, wmin in request_arrays(m):
            w(f"#define KMSG_WIRE_MIN_{m.name}_{path} {wmin}")
    w("")
    w("/* Every request body, for a caller that decodes before it dispatches. */")
    w("union kmsg_request {")
    for m in reqs:
        w(f"\tstruct {m.name} {m.name[:-len('Request')]};")
    w("};")
    w("")
    w("/* any: decodes the body of request `key` at `version` into out (a union")
    w(" * kmsg_request). Returns 0, -ENOTSUP for an unknown key or a version outside")
    w(" * the schema, -EBADMSG or -ENOMEM. */")
    w("int kmsg_decode_request(int16_t key, int16_t version, struct kreader *r, void *out_union,")
    w("\t\t\tstruct karena *a);")
    w("/* any: the schema of request/response `key`, NULL when unknown. */")
    w("const struct kschema *kmsg_request_schema(int16_t key);")
    w("const struct kschema *kmsg_response_schema(int16_t key);")
    w("/* any: every top-level schema (requests, responses, data), NULL-terminated. */")
    w("extern const struct kschema *const kmsg_all_schemas[];")
    w("")
    w("#endif /* SLUICE_KMSG_H */")


def emit_field(s, f, w):
    items = [f'.name = "{f.name}"', f".off = offsetof(struct {s.cname}, {f.name})"]
    if f.is_array:
        items.append(f".off_n = offsetof(struct {s.cname}, {f.name}_n)")
        items.append(".type = KT_ARRAY")
        items.append(f".elem = {f.ktype}")
    else:
        items.append(f".type = {f.ktype}")
    if f.sub is not None:
        items.append(f".sub = &kschema_{f.sub.cname}")
    items.append(f".versions = {cvr(f.versions)}")
    items.append(f".nullable = {cvr(f.nullable)}")
    items.append(f".tagged = {cvr(f.tagged)}")
    items.append(f".tag = {f.tag}")
    if f.idef:
        items.append(f".idef = {c_int(f.idef)}")
    if f.fdef:
        items.append(f".fdef = {f.fdef!r}")
    if f.def_null:
        items.append(".def_null = true")
    # Two lines per field keeps the table readable in a diff.
    w("\t{ " + ", ".join(items[:3 if not f.is_array else 5]) + ",")
    w("\t  " + ", ".join(items[3 if not f.is_array else 5:]) + " },")


def emit_source(msgs, out):
    w = out.append
    w("/* kmsg.c: GENERATED by dataplane/proto/kgen.py. Do not edit. */")
    w('#include "kmsg.h"')
    w("")
    w("#include <stddef.h>")
    w("")
    w("#define KV_NONE { 1, 0 }")
    w("")
    for m in msgs:
        for s in m.structs:
            top = s is m.root
            if s.fields:
                w(f"static const struct kfield kf_{s.cname}[] = {{")
                for f in s.fields:
                    emit_field(s, f, w)
                w("};")
            w(f"const struct kschema kschema_{s.cname} = {{")
            w(f'\t.name = "{s.cname}", .fields = {"kf_" + s.cname if s.fields else "NULL"},')
            w(f"\t.nfields = {len(s.fields)}, .size = sizeof(struct {s.cname}),")
            if top:
                w(f"\t.api_key = {m.api_key}, .valid = {cvr(m.valid)}, .flexible = {cvr(m.flexible)},")
            else:
                w("\t.api_key = -1, .valid = KV_NONE, .flexible = KV_NONE,")
            w("};")
        n = m.name
        w(f"int {n}_decode(struct kreader *r, int16_t version, struct {n} *out, struct karena *a)")
        w(f"{{\n\treturn kcodec_decode(&kschema_{n}, r, version, out, a);\n}}")
        w(f"int {n}_encode(struct kwriter *w, int16_t version, const struct {n} *in)")
        w(f"{{\n\treturn kcodec_encode(&kschema_{n}, w, version, in);\n}}")
        w(f"size_t {n}_size(int16_t version, const struct {n} *in)")
        w(f"{{\n\treturn kcodec_size(&kschema_{n}, version, in);\n}}")
        w("")

    reqs = api_requests(msgs)
    resps = {m.api_key: m for m in msgs if m.kind == "response"}
    for m in reqs:
        if m.api_key not in resps:
            raise SchemaError(f"{m.name}: no response schema")
    w("static const struct kapi_info kapi_table[] = {")
    for m in reqs:
        lo, hi = m.valid
        flo = m.flexible[0] if m.flexible[0] <= m.flexible[1] else -1
        w(f'\t{{ {m.api_key}, "{m.name[:-len("Request")]}", {lo}, {hi}, {flo} }},')
    w("};")
    w("")
    w("/* Indexed by api key: the request and response schemas, and the api entry. */")
    w("static const struct {")
    w("\tconst struct kschema *req, *resp;")
    w("\tconst struct kapi_info *info;")
    w("} kapi_by_key[KWIRE_API_KEY_MAX + 1] = {")
    for i, m in enumerate(reqs):
        w(f"\t[{m.api_key}] = {{ &kschema_{m.name}, &kschema_{resps[m.api_key].name}, &kapi_table[{i}] }},")
    w("};")
    w("")
    w("const struct kapi_info *kapi_info(int16_t api_key)")
    w("{")
    w("\tif (api_key < 0 || api_key > KWIRE_API_KEY_MAX)")
    w("\t\treturn NULL;")
    w("\treturn kapi_by_key[api_key].info;")
    w("}")
    w("")
    w("bool kapi_flexible(int16_t api_key, int16_t api_version)")
    w("{")
    w("\tconst struct kapi_info *i = kapi_info(api_key);")
    w("\treturn i != NULL && i->flexible_min >= 0 && api_version >= i->flexible_min &&")
    w("\t       api_version <= i->max_version;")
    w("}")
    w("")
    w("const struct kschema *kmsg_request_schema(int16_t key)")
    w("{")
    w("\treturn key < 0 || key > KWIRE_API_KEY_MAX ? NULL : kapi_by_key[key].req;")
    w("}")
    w("")
    w("const struct kschema *kmsg_response_schema(int16_t key)")
    w("{")
    w("\treturn key < 0 || key > KWIRE_API_KEY_MAX ? NULL : kapi_by_key[key].resp;")
    w("}")
    w("")
    w("int kmsg_decode_request(int16_t key, int16_t version, struct kreader *r, void *out_union,")
    w("\t\t\tstruct karena *a)")
    w("{")
    w("\tconst struct kschema *s = kmsg_request_schema(key);")
    w("\tif (s == NULL || !kv_in(s->valid, version))")
    w("\t\treturn -ENOTSUP;")
    w("\treturn kcodec_decode(s, r, version, out_union, a);")
    w("}")
    w("")
    w("const struct kschema *const kmsg_all_schemas[] = {")
    for m in msgs:
        w(f"\t&kschema_{m.name},")
    w("\tNULL,")
    w("};")


ERR_NAME_RE = re.compile(r"[A-Z][A-Z0-9_]*")


def load_errors(path):
    """errors.txt: '# ...' comments, then one 'code NAME' per line, in code order."""
    errs = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            parts = line.split()
            if len(parts) != 2 or not re.fullmatch(r"-?\d+", parts[0]) \
                    or not ERR_NAME_RE.fullmatch(parts[1]):
                raise SchemaError(f"{path}:{n}: expected 'code NAME', got {line!r}")
            code = int(parts[0])
            if not -32768 <= code <= 32767:
                raise SchemaError(f"{path}:{n}: code {code} is not an int16")
            if errs and code <= errs[-1][0]:
                raise SchemaError(f"{path}:{n}: codes must increase")
            errs.append((code, parts[1]))
    names = [e[1] for e in errs]
    if len(set(names)) != len(names):
        raise SchemaError(f"{path}: a name is listed twice")
    if (0, "NONE") not in errs:
        raise SchemaError(f"{path}: no 0 NONE")
    return errs


def api_const_name(m):
    """ProduceRequest -> PRODUCE, AddPartitionsToTxnRequest -> ADD_PARTITIONS_TO_TXN:
    Kafka's own ApiKeys names."""
    base = m.name[:-len("Request")]
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", base).upper()


def api_requests(msgs):
    reqs = sorted((m for m in msgs if m.kind == "request"), key=lambda m: m.api_key)
    keys = [m.api_key for m in reqs]
    if len(set(keys)) != len(keys):
        raise SchemaError("two request schemas share an api key")
    for m in reqs:
        if not 0 <= m.api_key <= 127:
            raise SchemaError(f"{m.name}: api key outside KWIRE_API_KEY_MAX")
    return reqs


def emit_kerr_header(errs, msgs, out):
    w = out.append
    reqs = api_requests(msgs)
    w("/* kerr.h: GENERATED by dataplane/proto/kgen.py from dataplane/proto/schema/errors.txt")
    w(" * (Kafka 3.7.1 Errors.java) and the request schemas beside it. Do not edit: change")
    w(" * the table or the generator.")
    w(" *")
    w(" * The one vocabulary for Kafka's numbers: error codes (enum kerr, never mixed with")
    w(" * errno) and api keys (enum kapi), each by its Kafka name. Code that answers a")
    w(" * client or compares a key uses these names, not the numbers.")
    w(" * Locality: any.")
    w(" */")
    w("#ifndef SLUICE_KERR_H")
    w("#define SLUICE_KERR_H")
    w("")
    w("/* Every Kafka error code. Wire type: int16. */")
    w("enum kerr {")
    for code, name in errs:
        w(f"\tKERR_{name} = {code},")
    w("};")
    w(f"#define KERR_CODE_MIN ({errs[0][0]})")
    w(f"#define KERR_CODE_MAX {errs[-1][0]}")
    w(f"#define KERR_CODES_N {len(errs)}     /* names in the table */")
    w("")
    w("/* Every api key a request schema here defines. Wire type: int16. */")
    w("enum kapi {")
    for m in reqs:
        w(f"\tKAPI_{api_const_name(m)} = {m.api_key},")
    w("};")
    w(f"#define KAPI_KEY_MAX {reqs[-1].api_key}")
    w(f"#define KAPI_KEYS_N {len(reqs)}     /* request schemas */")
    w("")
    w("/* any: Kafka's name of error code `code` (\"NONE\" for 0), NULL if Kafka 3.7.1 has")
    w(" * no such code. */")
    w("const char *kerr_name(int code);")
    w("/* any: Kafka's ApiKeys name of api key `key` (\"PRODUCE\"), NULL if no schema here. */")
    w("const char *kapi_name(int key);")
    w("")
    w("#endif /* SLUICE_KERR_H */")


def emit_kerr_source(errs, msgs, out):
    w = out.append
    reqs = api_requests(msgs)
    lo, hi = errs[0][0], errs[-1][0]
    w("/* kerr.c: GENERATED by dataplane/proto/kgen.py. Do not edit. */")
    w('#include "kerr.h"')
    w("")
    w("#include <stddef.h>")
    w("")
    w("/* Indexed by code - KERR_CODE_MIN; NULL: no such code. */")
    w(f"static const char *const kerr_names[{hi - lo + 1}] = {{")
    for code, name in errs:
        w(f'\t[KERR_{name} - KERR_CODE_MIN] = "{name}",')
    w("};")
    w("")
    w("const char *kerr_name(int code)")
    w("{")
    w("\tif (code < KERR_CODE_MIN || code > KERR_CODE_MAX)")
    w("\t\treturn NULL;")
    w("\treturn kerr_names[code - KERR_CODE_MIN];")
    w("}")
    w("")
    w("static const char *const kapi_names[KAPI_KEY_MAX + 1] = {")
    for m in reqs:
        w(f'\t[KAPI_{api_const_name(m)}] = "{api_const_name(m)}",')
    w("};")
    w("")
    w("const char *kapi_name(int key)")
    w("{")
    w("\tif (key < 0 || key > KAPI_KEY_MAX)")
    w("\t\treturn NULL;")
    w("\treturn kapi_names[key];")
    w("}")


def write_out(path, lines):
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    os.replace(path + ".tmp", path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--header")
    ap.add_argument("--source")
    ap.add_argument("--kerr-header")
    ap.add_argument("--kerr-source")
    ap.add_argument("--errors")
    ap.add_argument("schemas", nargs="+")
    args = ap.parse_args()
    kmsg = args.header is not None and args.source is not None
    kerr = args.kerr_header is not None and args.kerr_source is not None \
        and args.errors is not None
    if kmsg == kerr:
        ap.error("give either --header and --source, or --kerr-header, --kerr-source and --errors")
    msgs = []
    try:
        for path in sorted(args.schemas, key=os.path.basename):
            if not path.endswith(".json"):
                continue
            m = Message(path)
            if m.kind == "header":
                continue
            if m.kind not in ("request", "response", "data"):
                raise SchemaError(f"{path}: unknown schema type {m.kind}")
            msgs.append(m)
    except (SchemaError, KeyError, ValueError) as e:
        sys.exit(f"kgen.py: {e}")
    msgs.sort(key=lambda m: (m.api_key if m.api_key >= 0 else 1 << 16, m.kind, m.name))
    h, c = [], []
    try:
        if kerr:
            errs = load_errors(args.errors)
            emit_kerr_header(errs, msgs, h)
            emit_kerr_source(errs, msgs, c)
            outs = ((args.kerr_header, h), (args.kerr_source, c))
        else:
            emit_header(msgs, h)
            emit_source(msgs, c)
            outs = ((args.header, h), (args.source, c))
    except SchemaError as e:
        sys.exit(f"kgen.py: {e}")
    for path, lines in outs:
        write_out(path, lines)


if __name__ == "__main__":
    main()
