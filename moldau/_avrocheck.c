/*
 * moldau._avrocheck: a fast "does this decode" test of Avro binary data, for broker-side schema validation.
 *
 * Decoding every validated record with fastavro costs microseconds per record, which would halve produce
 * throughput; this walk builds no objects. It only ever says "valid" for data the full decode accepts too
 * (moldau.registry.avro_fast compiles only schemas for which that holds, and the tests check it); anything it
 * refuses is decoded in full by the schema format, which decides and words the error.
 *
 * schema_ids(records, field) and unchecked(records, field, programs) do the same for every key or value of a
 * v2 records section in one call (see below), so a batch's valid records cost no Python code at all.
 *
 * valid(program, payload, start=0) -> bool
 *   program: a bytes object of native int32s, the schema compiled by moldau.registry.avro_fast; node 0 is the
 *   root. payload[start:]: the Avro binary data. True when it is one datum of the schema with no bytes left over.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

enum {
    K_NULL, K_BOOLEAN, K_INT, K_LONG, K_FLOAT, K_DOUBLE, K_BYTES, K_STRING,
    K_FIXED, K_ENUM, K_ARRAY, K_MAP, K_UNION, K_RECORD
};

#define MAX_DEPTH 200

typedef struct {
    const int32_t *prog;
    Py_ssize_t prog_len;
    const uint8_t *buf;
    Py_ssize_t pos, end;
} Walk;

/* A zigzag varint of at most max_bytes bytes; 0 on success. */
static int read_long(Walk *w, int max_bytes, int64_t *out) {
    uint64_t raw = 0;
    for (int i = 0; i < max_bytes; i++) {
        if (w->pos >= w->end) return -1;
        uint8_t byte = w->buf[w->pos++];
        raw |= (uint64_t)(byte & 0x7F) << (7 * i);
        if (!(byte & 0x80)) {
            *out = (int64_t)(raw >> 1) ^ -(int64_t)(raw & 1);
            return 0;
        }
    }
    return -1;
}

/* Well-formed UTF-8 as Python's strict decoder wants it (no overlongs, no surrogates, nothing past U+10FFFF). */
static int valid_utf8(const uint8_t *s, Py_ssize_t n) {
    Py_ssize_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        if (c < 0x80) {
            /* ASCII, the usual case: eight bytes at a time */
            while (i + 8 <= n) {
                uint64_t chunk;
                memcpy(&chunk, s + i, 8);
                if (chunk & 0x8080808080808080ULL) break;
                i += 8;
            }
            if (i < n && s[i] < 0x80) i++;
            continue;
        }
        if (c >= 0xC2 && c <= 0xDF) {
            if (i + 1 >= n || (s[i + 1] & 0xC0) != 0x80) return 0;
            i += 2;
        } else if (c >= 0xE0 && c <= 0xEF) {
            if (i + 2 >= n) return 0;
            uint8_t c1 = s[i + 1];
            if (c == 0xE0 && c1 < 0xA0) return 0;
            if (c == 0xED && c1 > 0x9F) return 0;
            if ((c1 & 0xC0) != 0x80 || (s[i + 2] & 0xC0) != 0x80) return 0;
            i += 3;
        } else if (c >= 0xF0 && c <= 0xF4) {
            if (i + 3 >= n) return 0;
            uint8_t c1 = s[i + 1];
            if (c == 0xF0 && c1 < 0x90) return 0;
            if (c == 0xF4 && c1 > 0x8F) return 0;
            if ((c1 & 0xC0) != 0x80 || (s[i + 2] & 0xC0) != 0x80 || (s[i + 3] & 0xC0) != 0x80) return 0;
            i += 4;
        } else {
            return 0;
        }
    }
    return 1;
}

static int skip(Walk *w, Py_ssize_t n) {
    if (n < 0 || n > w->end - w->pos) return -1;
    w->pos += n;
    return 0;
}

/* A length-prefixed bytes or string value. */
static int walk_bytes(Walk *w, int is_string) {
    int64_t length;
    if (read_long(w, 10, &length) != 0 || length < 0 || length > w->end - w->pos) return -1;
    if (is_string && !valid_utf8(w->buf + w->pos, (Py_ssize_t)length)) return -1;
    w->pos += (Py_ssize_t)length;
    return 0;
}

static int walk(Walk *w, int32_t node, int depth);

/* Array items or map values, in blocks: a count (negative: followed by the block's size in bytes), 0 ends.
   `zero_width`: the items take no bytes (null, empty fixed, records of such), so there is nothing to count. */
static int walk_blocks(Walk *w, int32_t item, int is_map, int zero_width, int depth) {
    for (;;) {
        int64_t count, size;
        if (read_long(w, 10, &count) != 0) return -1;
        if (count == 0) return 0;
        if (count < 0) {
            if (count == INT64_MIN || read_long(w, 10, &size) != 0) return -1;
            count = -count;
        }
        if (zero_width && !is_map) continue;
        /* Otherwise every item takes at least a byte: a count beyond what is left cannot be valid, and a hostile
           one cannot make the walk spin. */
        if (count > w->end - w->pos) return -1;
        for (int64_t i = 0; i < count; i++) {
            if (is_map && walk_bytes(w, 1) != 0) return -1;
            if (walk(w, item, depth + 1) != 0) return -1;
        }
    }
}

static int walk(Walk *w, int32_t node, int depth) {
    if (depth > MAX_DEPTH || node < 0 || node >= w->prog_len) return -1;
    const int32_t *n = w->prog + node;
    int64_t value;
    switch (n[0]) {
    case K_NULL: return 0;
    case K_BOOLEAN: /* 0 or 1 only: what other bytes mean differs between decoders; the full decode decides */
        if (w->pos >= w->end || w->buf[w->pos] > 1) return -1;
        w->pos++;
        return 0;
    case K_INT: return read_long(w, 5, &value);
    case K_LONG: return read_long(w, 10, &value);
    case K_FLOAT: return skip(w, 4);
    case K_DOUBLE: return skip(w, 8);
    case K_BYTES: return walk_bytes(w, 0);
    case K_STRING: return walk_bytes(w, 1);
    case K_FIXED: return skip(w, n[1]);
    case K_ENUM:
        if (read_long(w, 10, &value) != 0) return -1;
        return value >= 0 && value < n[1] ? 0 : -1;
    case K_ARRAY: return walk_blocks(w, n[1], 0, n[2], depth);
    case K_MAP: return walk_blocks(w, n[1], 1, 0, depth);
    case K_UNION:
        if (read_long(w, 10, &value) != 0 || value < 0 || value >= n[1]) return -1;
        return walk(w, n[2 + value], depth + 1);
    case K_RECORD:
        for (int32_t f = 0; f < n[1]; f++)
            if (walk(w, n[2 + f], depth + 1) != 0) return -1;
        return 0;
    default: return -1;
    }
}

static PyObject *valid(PyObject *self, PyObject *args) {
    Py_buffer program, payload;
    Py_ssize_t start = 0;
    if (!PyArg_ParseTuple(args, "y*y*|n", &program, &payload, &start)) return NULL;
    if (start < 0 || start > payload.len) start = payload.len;
    Walk w = {.prog = (const int32_t *)program.buf, .prog_len = program.len / (Py_ssize_t)sizeof(int32_t),
              .buf = (const uint8_t *)payload.buf, .pos = start, .end = payload.len};
    int ok = walk(&w, 0, 0) == 0 && w.pos == w.end;
    PyBuffer_Release(&program);
    PyBuffer_Release(&payload);
    return PyBool_FromLong(ok);
}

/* -- whole records sections: the common case of a batch in one C call ---------------------------------------- */

/* The key (field 0) or value (field 1) of the next record of a v2 records section; *data is NULL for a null
   field. Advances *pos past the record. 0 on success, -1 when the record does not parse. */
static int next_field(const uint8_t *buf, Py_ssize_t end, Py_ssize_t *pos, int field, const uint8_t **data,
                      Py_ssize_t *len) {
    Walk w = {.buf = buf, .pos = *pos, .end = end};
    int64_t length, ignored, size;
    if (read_long(&w, 5, &length) != 0 || length <= 0 || length > end - w.pos) return -1;
    Py_ssize_t record_end = w.pos + (Py_ssize_t)length;
    w.end = record_end;
    w.pos += 1; /* attributes */
    if (read_long(&w, 10, &ignored) != 0 || read_long(&w, 5, &ignored) != 0) return -1;
    for (int f = 0; f <= field; f++) {
        if (read_long(&w, 5, &size) != 0) return -1;
        if (size == -1) {
            *data = NULL;
            *len = 0;
            continue;
        }
        if (size < 0 || size > w.end - w.pos) return -1;
        *data = buf + w.pos;
        *len = (Py_ssize_t)size;
        w.pos += (Py_ssize_t)size;
    }
    *pos = record_end;
    return 0;
}

static long schema_id_of(const uint8_t *data) {
    return (long)(int32_t)(((uint32_t)data[1] << 24) | ((uint32_t)data[2] << 16) | ((uint32_t)data[3] << 8) |
                           (uint32_t)data[4]);
}

/* schema_ids(records, field) -> set of the schema ids in the wire-format keys (field 0) or values (field 1). */
static PyObject *schema_ids(PyObject *self, PyObject *args) {
    Py_buffer view;
    int field;
    if (!PyArg_ParseTuple(args, "y*i", &view, &field)) return NULL;
    PyObject *ids = PySet_New(NULL);
    Py_ssize_t pos = 0;
    long last = -1;
    int have_last = 0;
    while (ids != NULL && pos < view.len) {
        const uint8_t *data;
        Py_ssize_t len;
        if (next_field(view.buf, view.len, &pos, field, &data, &len) != 0) {
            PyErr_SetString(PyExc_ValueError, "records do not parse");
            Py_CLEAR(ids);
            break;
        }
        if (data == NULL || len < 5 || data[0] != 0) continue;
        long id = schema_id_of(data);
        if (have_last && id == last) continue;
        PyObject *key = PyLong_FromLong(id);
        if (key == NULL || PySet_Add(ids, key) != 0) Py_CLEAR(ids);
        Py_XDECREF(key);
        last = id;
        have_last = 1;
    }
    PyBuffer_Release(&view);
    return ids;
}

/* unchecked(records, field, programs) -> [record index, ...]: the records whose key (field 0) or value (field 1)
   is not null and not shown valid here (not the wire format, an id without a program in `programs`, or data the
   walk refuses): the caller checks those in full. */
static PyObject *unchecked(PyObject *self, PyObject *args) {
    Py_buffer view;
    int field;
    PyObject *programs;
    if (!PyArg_ParseTuple(args, "y*iO!", &view, &field, &PyDict_Type, &programs)) return NULL;
    PyObject *out = PyList_New(0);
    Py_ssize_t pos = 0, index = 0;
    long last = -1;
    PyObject *last_program = NULL; /* borrowed from `programs` */
    while (out != NULL && pos < view.len) {
        const uint8_t *data;
        Py_ssize_t len;
        if (next_field(view.buf, view.len, &pos, field, &data, &len) != 0) {
            PyErr_SetString(PyExc_ValueError, "records do not parse");
            Py_CLEAR(out);
            break;
        }
        int ok = data == NULL;
        if (!ok && len >= 5 && data[0] == 0) {
            long id = schema_id_of(data);
            if (last_program == NULL || id != last) {
                PyObject *key = PyLong_FromLong(id);
                if (key == NULL) {
                    Py_CLEAR(out);
                    break;
                }
                last_program = PyDict_GetItemWithError(programs, key);
                Py_DECREF(key);
                if (last_program == NULL && PyErr_Occurred()) {
                    Py_CLEAR(out);
                    break;
                }
                last = id;
            }
            if (last_program != NULL && PyBytes_Check(last_program)) {
                Walk w = {.prog = (const int32_t *)PyBytes_AS_STRING(last_program),
                          .prog_len = PyBytes_GET_SIZE(last_program) / (Py_ssize_t)sizeof(int32_t),
                          .buf = data, .pos = 5, .end = len};
                ok = walk(&w, 0, 0) == 0 && w.pos == w.end;
            }
        }
        if (!ok) {
            PyObject *i = PyLong_FromSsize_t(index);
            if (i == NULL || PyList_Append(out, i) != 0) Py_CLEAR(out);
            Py_XDECREF(i);
        }
        index++;
    }
    PyBuffer_Release(&view);
    return out;
}

static PyMethodDef methods[] = {
    {"valid", valid, METH_VARARGS, "Whether Avro binary data is one datum of a compiled schema."},
    {"schema_ids", schema_ids, METH_VARARGS, "The schema ids of a records section's wire-format keys or values."},
    {"unchecked", unchecked, METH_VARARGS, "The records whose key or value the fast walk does not vouch for."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_avrocheck", NULL, -1, methods};

PyMODINIT_FUNC PyInit__avrocheck(void) { return PyModule_Create(&module); }
