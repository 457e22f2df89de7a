/*
 * moldau._records: the record walk of moldau.protocol.record_validation, in C.
 *
 * Every produced record is walked before its batch is acknowledged; in Python that walk costs a few
 * microseconds per record, which caps produce throughput. This is the same walk, byte for byte the same
 * rules and messages as `_walk_records_py` (the tests compare the two on valid and corrupt input).
 *
 * walk_records(buffer, count, last_offset_delta, strict, max_record_bytes)
 *   -> (error_index or -1, error_kind, message, min_ts_delta, max_ts_delta, [null-key indexes])
 * error_kind: 0 corrupt, 1 inconsistent with the batch header.
 *
 * key_values(buffer) -> [(key or None, value or None), ...]
 *   The keys and values of a records section, for broker-side schema validation (moldau.registry); raises
 *   ValueError where the records do not parse (the walk above reports those in detail). Same as
 *   `_key_values_py`.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdio.h>

typedef struct {
    const uint8_t *buf;
    Py_ssize_t pos;
    char message[160];
} Cursor;

/* A zigzag signed varint of at most max_bytes bytes, within [pos, end). Returns 0 on success. */
static int read_varint(Cursor *c, Py_ssize_t end, int max_bytes, int64_t *out) {
    uint64_t raw = 0;
    int shift = 0;
    for (int i = 0; i < max_bytes; i++) {
        if (c->pos >= end) {
            snprintf(c->message, sizeof c->message, "varint runs past the end of the record");
            return -1;
        }
        uint8_t byte = c->buf[c->pos++];
        raw |= (uint64_t)(byte & 0x7F) << shift;
        if (!(byte & 0x80)) {
            *out = (int64_t)(raw >> 1) ^ -(int64_t)(raw & 1);
            return 0;
        }
        shift += 7;
    }
    snprintf(c->message, sizeof c->message, "varint longer than %d bytes", max_bytes);
    return -1;
}

/* A length-prefixed field. Sets *is_null; returns 0 on success. */
static int skip_bytes(Cursor *c, Py_ssize_t end, const char *what, int nullable, int *is_null) {
    int64_t length;
    *is_null = 0;
    if (read_varint(c, end, 5, &length) != 0) return -1;
    if (length < 0) {
        if (length == -1 && nullable) {
            *is_null = 1;
            return 0;
        }
        snprintf(c->message, sizeof c->message, "invalid %s length %lld", what, (long long)length);
        return -1;
    }
    if (length > end - c->pos) {
        snprintf(c->message, sizeof c->message, "%s of %lld bytes runs past the end of the record", what,
                 (long long)length);
        return -1;
    }
    c->pos += length;
    return 0;
}

static PyObject *result(Py_ssize_t index, int kind, const char *message, int64_t min_ts, int64_t max_ts,
                        PyObject *null_keys) {
    PyObject *keys = null_keys ? null_keys : PyList_New(0);
    if (keys == NULL) return NULL;
    return Py_BuildValue("(nisLLN)", index, kind, message, (long long)min_ts, (long long)max_ts, keys);
}

static PyObject *walk_records(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t count, last_offset_delta, max_record_bytes;
    int strict;
    if (!PyArg_ParseTuple(args, "y*nnpn", &view, &count, &last_offset_delta, &strict, &max_record_bytes))
        return NULL;
    Cursor c = {.buf = (const uint8_t *)view.buf, .pos = 0};
    Py_ssize_t end = view.len, index = 0;
    int64_t previous_delta = -1, min_ts = 0, max_ts = 0;
    PyObject *null_keys = PyList_New(0);
    PyObject *out = NULL;
    char message[200];
    if (null_keys == NULL) goto done;
    while (c.pos < end) {
        int64_t length, ts_delta, offset_delta, headers;
        int is_null;
        if (index >= count) {
            snprintf(message, sizeof message, "more records than the %zd the batch header declares", count);
            out = result(index, 1, message, 0, 0, NULL);
            goto done;
        }
        if (read_varint(&c, end, 5, &length) != 0) goto corrupt;
        if (length < 0 || length > end - c.pos) {
            snprintf(c.message, sizeof c.message, "record length %lld runs past the end of the batch",
                     (long long)length);
            goto corrupt;
        }
        if (length > max_record_bytes) {
            snprintf(c.message, sizeof c.message, "record of %lld bytes exceeds the %zd-byte limit",
                     (long long)length, max_record_bytes);
            goto corrupt;
        }
        Py_ssize_t record_end = c.pos + length;
        c.pos += 1; /* attributes */
        if (read_varint(&c, record_end, 10, &ts_delta) != 0) goto corrupt;
        if (read_varint(&c, record_end, 5, &offset_delta) != 0) goto corrupt;
        if (strict && offset_delta != index) {
            snprintf(message, sizeof message, "offset delta %lld, expected %zd", (long long)offset_delta, index);
            out = result(index, 1, message, 0, 0, NULL);
            goto done;
        }
        if (!strict && !(previous_delta < offset_delta && offset_delta <= last_offset_delta)) {
            snprintf(message, sizeof message,
                     "offset delta %lld out of order or past the batch's last offset delta %zd",
                     (long long)offset_delta, last_offset_delta);
            out = result(index, 1, message, 0, 0, NULL);
            goto done;
        }
        previous_delta = offset_delta;
        if (skip_bytes(&c, record_end, "key", 1, &is_null) != 0) goto corrupt;
        if (is_null) {
            PyObject *i = PyLong_FromSsize_t(index);
            if (i == NULL || PyList_Append(null_keys, i) != 0) {
                Py_XDECREF(i);
                goto done;
            }
            Py_DECREF(i);
        }
        if (skip_bytes(&c, record_end, "value", 1, &is_null) != 0) goto corrupt;
        if (read_varint(&c, record_end, 5, &headers) != 0) goto corrupt;
        if (headers < 0 || headers > record_end - c.pos) {
            snprintf(c.message, sizeof c.message, "invalid header count %lld", (long long)headers);
            goto corrupt;
        }
        for (int64_t h = 0; h < headers; h++) {
            if (skip_bytes(&c, record_end, "header key", 0, &is_null) != 0) goto corrupt;
            if (skip_bytes(&c, record_end, "header value", 1, &is_null) != 0) goto corrupt;
        }
        if (c.pos != record_end) {
            snprintf(c.message, sizeof c.message, "record fields end at %+zd bytes from its declared length",
                     c.pos - record_end);
            goto corrupt;
        }
        if (index == 0 || ts_delta < min_ts) min_ts = ts_delta;
        if (index == 0 || ts_delta > max_ts) max_ts = ts_delta;
        index++;
    }
    if (index != count) {
        snprintf(message, sizeof message, "the batch header declares %zd records, the batch holds %zd", count,
                 index);
        out = result(index, 1, message, 0, 0, NULL);
        goto done;
    }
    out = result(-1, 0, "", min_ts, max_ts, null_keys);
    null_keys = NULL; /* the result owns it now */
    goto done;
corrupt:
    out = result(index, 0, c.message, 0, 0, NULL);
done:
    Py_XDECREF(null_keys);
    PyBuffer_Release(&view);
    return out;
}

/* A length-prefixed field as bytes, or None for length -1; NULL with c->message set when it does not parse. */
static PyObject *read_field(Cursor *c, Py_ssize_t end, const char *what) {
    int64_t length;
    if (read_varint(c, end, 5, &length) != 0) return NULL;
    if (length == -1) Py_RETURN_NONE;
    if (length < 0 || length > end - c->pos) {
        snprintf(c->message, sizeof c->message, "invalid %s length %lld", what, (long long)length);
        return NULL;
    }
    PyObject *out = PyBytes_FromStringAndSize((const char *)c->buf + c->pos, (Py_ssize_t)length);
    if (out == NULL) snprintf(c->message, sizeof c->message, "out of memory");
    c->pos += length;
    return out;
}

static PyObject *key_values(PyObject *self, PyObject *args) {
    Py_buffer view;
    if (!PyArg_ParseTuple(args, "y*", &view)) return NULL;
    Cursor c = {.buf = (const uint8_t *)view.buf, .pos = 0, .message = ""};
    Py_ssize_t end = view.len;
    PyObject *out = PyList_New(0);
    PyObject *key = NULL, *value = NULL;
    if (out == NULL) goto done;
    while (c.pos < end) {
        int64_t length, ignored;
        if (read_varint(&c, end, 5, &length) != 0) goto bad;
        if (length <= 0 || length > end - c.pos) {
            snprintf(c.message, sizeof c.message, "record length %lld runs past the end of the batch",
                     (long long)length);
            goto bad;
        }
        Py_ssize_t record_end = c.pos + length;
        c.pos += 1; /* attributes */
        if (read_varint(&c, record_end, 10, &ignored) != 0) goto bad; /* timestamp delta */
        if (read_varint(&c, record_end, 5, &ignored) != 0) goto bad;  /* offset delta */
        if ((key = read_field(&c, record_end, "key")) == NULL) goto bad;
        if ((value = read_field(&c, record_end, "value")) == NULL) goto bad;
        PyObject *pair = PyTuple_Pack(2, key, value);
        Py_CLEAR(key);
        Py_CLEAR(value);
        if (pair == NULL || PyList_Append(out, pair) != 0) {
            Py_XDECREF(pair);
            Py_CLEAR(out);
            goto done;
        }
        Py_DECREF(pair);
        c.pos = record_end; /* headers are not needed */
    }
    goto done;
bad:
    Py_XDECREF(key);
    Py_CLEAR(out);
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, c.message);
done:
    PyBuffer_Release(&view);
    return out;
}

static PyMethodDef methods[] = {
    {"key_values", key_values, METH_VARARGS, "The (key, value) pairs of a v2 batch's records section."},
    {"walk_records", walk_records, METH_VARARGS, "Walk the records of a v2 batch's records section."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_records", NULL, -1, methods};

PyMODINIT_FUNC PyInit__records(void) { return PyModule_Create(&module); }
