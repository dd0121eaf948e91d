/* The native record codec: reference.py's functions (append_batches, records_end, decode_records, scan_records,
 * encode_record, encode_records) in C, with the same results and the same CorruptRecordError messages. reference.py
 * is the specification; the differential tests (tests/record/test_codec_differential.py) hold the two together.
 *
 * Every read is bounds-checked against the buffer's length. Positions and raw varints are 128-bit: a varint may
 * carry up to 70 bits (10 bytes), and the reference, whose integers do not overflow, reports positions past the
 * buffer in its messages; 128 bits hold every value the reference can compute from one buffer. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

typedef __int128 i128;
typedef unsigned __int128 u128;

static PyObject *CorruptRecordError; /* odradek.client.errors.CorruptRecordError, owned by the module */

#define MIN_RECORD_BODY 6 /* the smallest record after its length prefix: six one-byte fields */
#define SCAN_PAUSE_EVERY 256 /* scan_records calls its pause callable before records 255, 511, ... */

/* ---------------------------------------------------------------------------------------------------------------
 * Helpers. */

/* A Python int for a 128-bit value (the fast path for int64). */
static PyObject *py_from_i128(i128 v) {
    if (v >= INT64_MIN && v <= INT64_MAX) return PyLong_FromLongLong((long long)v);
    PyObject *hi = PyLong_FromLongLong((long long)(v >> 64)); /* arithmetic shift: v = hi * 2**64 + lo */
    PyObject *lo = PyLong_FromUnsignedLongLong((unsigned long long)(uint64_t)v);
    PyObject *shift = PyLong_FromLong(64);
    PyObject *result = NULL, *shifted = NULL;
    if (hi && lo && shift && (shifted = PyNumber_Lshift(hi, shift))) result = PyNumber_Add(shifted, lo);
    Py_XDECREF(hi);
    Py_XDECREF(lo);
    Py_XDECREF(shift);
    Py_XDECREF(shifted);
    return result;
}

static void corrupt(const char *message) { PyErr_SetString(CorruptRecordError, message); }

/* Raise CorruptRecordError(prefix + str(a) + middle + str(b)). */
static void corrupt_two(const char *format, i128 a, i128 b) {
    PyObject *pa = py_from_i128(a), *pb = pa ? py_from_i128(b) : NULL;
    if (pa && pb) {
        PyObject *message = PyUnicode_FromFormat(format, pa, pb);
        if (message) {
            PyErr_SetObject(CorruptRecordError, message);
            Py_DECREF(message);
        }
    }
    Py_XDECREF(pa);
    Py_XDECREF(pb);
}

enum { VARINT_OK = 0, VARINT_PAST_END = -1, VARINT_TOO_LONG = -2 };

/* read_zigzag: the raw varint at *pos (at most 10 bytes), advancing *pos. */
static inline int read_varint(const uint8_t *p, Py_ssize_t n, i128 *pos, u128 *out) {
    u128 z = 0;
    i128 at = *pos;
    for (int shift = 0;; shift += 7) {
        if (at < 0 || at >= n) return VARINT_PAST_END;
        uint8_t b = p[(Py_ssize_t)at++];
        z |= (u128)(b & 0x7F) << shift;
        if (b < 0x80) break;
        if (shift + 7 > 63) return VARINT_TOO_LONG;
    }
    *pos = at;
    *out = z;
    return VARINT_OK;
}

static inline i128 unzigzag(u128 z) { return (i128)(z >> 1) ^ -(i128)(z & 1); }

/* Put item i (stolen) into a list preallocated with `capacity` items, appending past it; 0 or -1. */
static int list_put(PyObject *list, Py_ssize_t capacity, long long i, PyObject *item) {
    if (!item) return -1;
    if (i < capacity) {
        PyList_SET_ITEM(list, (Py_ssize_t)i, item);
        return 0;
    }
    int appended = PyList_Append(list, item);
    Py_DECREF(item);
    return appended;
}

static int get_buffer(PyObject *obj, Py_buffer *view) {
    if (PyObject_GetBuffer(obj, view, PyBUF_SIMPLE) < 0) return -1;
    return 0;
}

static int to_position(PyObject *obj, const char *name, long long *out) {
    long long v = PyLong_AsLongLong(obj);
    if (v == -1 && PyErr_Occurred()) return -1;
    if (v < 0) {
        PyErr_Format(PyExc_ValueError, "%s must not be negative", name);
        return -1;
    }
    *out = v;
    return 0;
}

/* ---------------------------------------------------------------------------------------------------------------
 * records_end */

/* One record's end at pos, judging by its length prefix; -1 if it cannot be a record inside the buffer. */
static i128 lone_record_end(const uint8_t *p, Py_ssize_t n, i128 pos) {
    if (pos < 0 || pos + 1 >= n) return -1; /* the reference looks at two bytes even for a one-byte length */
    u128 z;
    if (read_varint(p, n, &pos, &z) != VARINT_OK) return -1;
    if ((z & 1) || (z >> 1) < MIN_RECORD_BODY) return -1;
    i128 end = pos + (i128)(z >> 1);
    return end <= n ? end : -1;
}

/* Where count records from start end by their length prefixes, or -1 (reference.records_end). */
static i128 walk_records(const uint8_t *p, Py_ssize_t n, i128 pos, long long count) {
    if (count == 1) return lone_record_end(p, n, pos);
    for (long long i = 0; i < count; i++) {
        if (pos + 1 >= n) return -1;
        uint8_t b0 = p[(Py_ssize_t)pos], b1 = p[(Py_ssize_t)pos + 1];
        if (b0 < 0x80 || b1 < 0x80) { /* one or two bytes: the reference's table steps */
            unsigned z = b0 < 0x80 ? b0 : ((b0 & 0x7Fu) | ((unsigned)b1 << 7));
            if ((z & 1) || (z >> 1) < MIN_RECORD_BODY) return -1;
            pos += (b0 < 0x80 ? 1 : 2) + (z >> 1);
        } else {
            pos = lone_record_end(p, n, pos);
            if (pos < 0) return -1;
        }
    }
    return pos > n ? -1 : pos;
}

static PyObject *records_end(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 3) {
        PyErr_Format(PyExc_TypeError, "records_end takes 3 arguments (%zd given)", nargs);
        return NULL;
    }
    long long start, count;
    if (to_position(args[1], "pos", &start) < 0) return NULL;
    count = PyLong_AsLongLong(args[2]);
    if (count == -1 && PyErr_Occurred()) return NULL;
    Py_buffer view;
    if (get_buffer(args[0], &view) < 0) return NULL;
    i128 end = walk_records(view.buf, view.len, start, count);
    PyBuffer_Release(&view);
    return PyLong_FromLongLong((long long)end);
}

/* ---------------------------------------------------------------------------------------------------------------
 * append_batches */

#define HEADER_SIZE 61
#define LOG_OVERHEAD 12
#define CRC_START 21
#define MIN_BATCH_LENGTH (HEADER_SIZE - LOG_OVERHEAD)
#define MAGIC 2
#define COMPRESSION_MASK 0x07
#define MIN_RECORD_SIZE (MIN_RECORD_BODY + 1)

static PyObject *crc32c_function; /* crc32c.crc32c, owned by the module: the CRC the reference computes */

static inline uint64_t be64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v = v << 8 | p[i];
    return v;
}

static inline uint32_t be32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static inline int16_t be16(const uint8_t *p) { return (int16_t)((uint16_t)p[0] << 8 | p[1]); }

/* 1 if crc32c(p[0:n]) == expected, 0 if not, -1 with an exception set. The memoryview lends the caller's buffer
 * for the call only: crc32c keeps no reference to its argument, and the view is released before the buffer is. */
static int crc_matches(const uint8_t *p, Py_ssize_t n, uint32_t expected) {
    PyObject *view = PyMemoryView_FromMemory((char *)p, n, PyBUF_READ);
    if (!view) return -1;
    PyObject *crc = PyObject_CallOneArg(crc32c_function, view);
    Py_DECREF(view);
    if (!crc) return -1;
    unsigned long value = PyLong_AsUnsignedLong(crc);
    Py_DECREF(crc);
    if (value == (unsigned long)-1 && PyErr_Occurred()) return -1;
    return value == expected;
}

/* The AppendBatch tuple of the batch whose header is at h: (base_offset, size, last_offset_delta, max_timestamp,
 * records_count, partition_leader_epoch, producer_id, producer_epoch, base_sequence). */
static PyObject *append_batch(const uint8_t *h, long long size) {
    long long fields[9] = {
        (int64_t)be64(h),       size, (int32_t)be32(h + 23), (int64_t)be64(h + 35), (int32_t)be32(h + 57),
        (int32_t)be32(h + 12), (int64_t)be64(h + 43), be16(h + 51), (int32_t)be32(h + 53),
    };
    PyObject *batch = PyTuple_New(9);
    if (!batch) return NULL;
    for (int i = 0; i < 9; i++) {
        PyObject *field = PyLong_FromLongLong(fields[i]);
        if (!field) {
            Py_DECREF(batch);
            return NULL;
        }
        PyTuple_SET_ITEM(batch, i, field);
    }
    return batch;
}

static PyObject *append_batches(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 4) {
        PyErr_Format(PyExc_TypeError, "append_batches takes 4 arguments (%zd given)", nargs);
        return NULL;
    }
    int overflow;
    long long max_batch_size = PyLong_AsLongLongAndOverflow(args[2], &overflow);
    if (max_batch_size == -1 && PyErr_Occurred()) return NULL;
    if (overflow) max_batch_size = overflow > 0 ? LLONG_MAX : LLONG_MIN;
    int check_records = PyObject_IsTrue(args[3]);
    if (check_records < 0) return NULL;
    Py_buffer view;
    if (get_buffer(args[0], &view) < 0) return NULL;
    const uint8_t *p = view.buf;
    Py_ssize_t n = view.len, position = 0;
    PyObject *batches = PyList_New(0);
    if (!batches) goto failed;
    while (position < n) {
        if (n - position < HEADER_SIZE) goto reject;
        const uint8_t *h = p + position;
        int32_t length = (int32_t)be32(h + 8), delta = (int32_t)be32(h + 23), count = (int32_t)be32(h + 57);
        long long size = (long long)length + LOG_OVERHEAD, batch_end = position + size;
        int attributes = be16(h + 21);
        if (!(length >= MIN_BATCH_LENGTH && size <= max_batch_size && batch_end <= n && (int8_t)h[16] == MAGIC &&
              delta >= 0 && count >= 0 && (long long)count <= (long long)delta + 1))
            goto reject;
        int crc_ok = crc_matches(h + CRC_START, (Py_ssize_t)(size - CRC_START), be32(h + 17));
        if (crc_ok < 0) goto failed;
        if (!crc_ok) goto reject;
        if (!(attributes & COMPRESSION_MASK)) {
            if (check_records ? walk_records(p, n, position + HEADER_SIZE, count) != batch_end
                              : (long long)count * MIN_RECORD_SIZE > size - HEADER_SIZE)
                goto reject;
        }
        if (list_put(batches, 0, 0, append_batch(h, size)) < 0) goto failed;
        position = (Py_ssize_t)batch_end;
    }
    PyBuffer_Release(&view);
    return batches;
reject:
    PyBuffer_Release(&view);
    Py_DECREF(batches);
    return PyLong_FromSsize_t(position);
failed:
    PyBuffer_Release(&view);
    Py_XDECREF(batches);
    return NULL;
}

/* ---------------------------------------------------------------------------------------------------------------
 * decode_records */

/* Raise the error the reference raises when a varint read fails inside the record loop. */
static void varint_error(int status) {
    if (status == VARINT_TOO_LONG)
        corrupt("varint longer than 10 bytes");
    else
        corrupt("record runs past the end of the batch");
}

/* bytes of data[start:stop], clamped to the buffer like a Python slice (start <= n here). */
static PyObject *slice(const uint8_t *p, Py_ssize_t n, i128 start, i128 stop) {
    if (stop > n) stop = n;
    if (stop < start) stop = start;
    return PyBytes_FromStringAndSize((const char *)p + (Py_ssize_t)start, (Py_ssize_t)(stop - start));
}

/* Stop the cyclic GC from tracking a tuple none of whose items it tracks (str, bytes, int, None, or tuples
 * already untracked): such a tuple can never be part of a reference cycle. CPython untracks exact tuples like
 * this itself, but only at a collection, and never a tuple subclass such as ConsumerRecord. A consumer decodes
 * records by the hundred thousand a second; tracked, they made the collector walk them, about a third of
 * `perf consume`'s time. */
static void untrack_if_atomic(PyObject *tuple) {
    PyObject **items = ((PyTupleObject *)tuple)->ob_item;
    for (Py_ssize_t i = 0, size = Py_SIZE(tuple); i < size; i++)
        if (PyObject_GC_IsTracked(items[i])) return;
    PyObject_GC_UnTrack(tuple);
}

/* reference._read_nullable without the copy: the nullable length-prefixed field at *pos (a length varint, then that
 * many bytes), advancing *pos past it. Its span is [*start, *end), *start -1 for a null. 0, or -1 with the
 * reference's error (a failed varint read, or "negative <field> length" for a length below -1). The span is not
 * checked against the buffer: the next read past it fails, or a slice of it is clamped, as in the reference. */
static inline int read_nullable(const uint8_t *p, Py_ssize_t n, i128 *pos, const char *field, i128 *start,
                                i128 *end) {
    u128 z;
    int status = read_varint(p, n, pos, &z);
    if (status != VARINT_OK) {
        varint_error(status);
        return -1;
    }
    *start = -1;
    *end = 0;
    if (z & 1) {
        if (z != 1) { /* a null in more than one byte is not canonical, but -1 all the same */
            PyErr_Format(CorruptRecordError, "negative %s length", field);
            return -1;
        }
        return 0;
    }
    *start = *pos;
    *end = *pos + (i128)(z >> 1);
    *pos = *end;
    return 0;
}

/* reference.read_headers: the headers tuple at *pos, advancing *pos; NULL with the reference's error. */
static PyObject *read_headers(const uint8_t *p, Py_ssize_t n, i128 *pos_io) {
    i128 pos = *pos_io;
    u128 z;
    int status = read_varint(p, n, &pos, &z);
    if (status != VARINT_OK) {
        varint_error(status);
        return NULL;
    }
    if (z & 1) {
        corrupt("negative record header count");
        return NULL;
    }
    PyObject *headers = PyList_New(0);
    if (!headers) return NULL;
    for (u128 i = 0, count = z >> 1; i < count; i++) {
        if ((status = read_varint(p, n, &pos, &z)) != VARINT_OK) goto varint_failed;
        if (z & 1) {
            corrupt("negative record header key length");
            goto failed;
        }
        i128 end = pos + (i128)(z >> 1);
        i128 stop = end > n ? n : end;
        PyObject *name = PyUnicode_DecodeUTF8((const char *)p + (Py_ssize_t)pos, (Py_ssize_t)(stop - pos), "strict");
        if (!name) {
            if (PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
                PyObject *type, *exc, *tb;
                PyErr_Fetch(&type, &exc, &tb);
                PyErr_NormalizeException(&type, &exc, &tb);
                PyObject *message = PyUnicode_FromFormat("record header name is not UTF-8: %S", exc);
                if (message) {
                    PyErr_SetObject(CorruptRecordError, message);
                    Py_DECREF(message);
                }
                Py_XDECREF(type);
                Py_XDECREF(exc);
                Py_XDECREF(tb);
            }
            goto failed;
        }
        pos = end;
        i128 value_start, value_end;
        if (read_nullable(p, n, &pos, "record header value", &value_start, &value_end) < 0) {
            Py_DECREF(name);
            goto failed;
        }
        PyObject *value = value_start < 0 ? Py_NewRef(Py_None) : slice(p, n, value_start, value_end);
        if (!value) {
            Py_DECREF(name);
            goto failed;
        }
        PyObject *pair = PyTuple_New(2);
        if (!pair) {
            Py_DECREF(name);
            Py_DECREF(value);
            goto failed;
        }
        PyTuple_SET_ITEM(pair, 0, name);
        PyTuple_SET_ITEM(pair, 1, value);
        untrack_if_atomic(pair);
        int appended = PyList_Append(headers, pair);
        Py_DECREF(pair);
        if (appended < 0) goto failed;
    }
    PyObject *result = PyList_AsTuple(headers);
    Py_DECREF(headers);
    if (result) untrack_if_atomic(result);
    *pos_io = pos;
    return result;
varint_failed:
    varint_error(status);
failed:
    Py_DECREF(headers);
    return NULL;
}

/* One record's fields, as parse_record finds them: absolute offset and timestamp, the key and value spans
 * (start -1: null), the headers (owned; NULL when only checked). */
typedef struct {
    i128 offset, timestamp, key_start, key_end, value_start, value_end;
    PyObject *headers;
} Parsed;

/* Parse the record at *pos (advancing it) as the reference's loop does, with its errors; 0 or -1. With
 * keep_headers 0 the headers are still read (and their names checked) but not kept. */
static int parse_record(const uint8_t *p, Py_ssize_t n, i128 *pos_io, long long base_offset, long long base_timestamp,
                        PyObject *no_headers, int keep_headers, Parsed *r) {
    i128 pos = *pos_io;
    u128 z;
    int status;
    r->headers = NULL;
    /* length */
    if ((status = read_varint(p, n, &pos, &z)) != VARINT_OK) goto varint_failed;
    if (z & 1) {
        corrupt("negative record length");
        return -1;
    }
    i128 record_end = pos + (i128)(z >> 1);
    /* the unused attributes byte, then the timestamp delta */
    pos += 1;
    if ((status = read_varint(p, n, &pos, &z)) != VARINT_OK) goto varint_failed;
    r->timestamp = (i128)base_timestamp + unzigzag(z);
    /* offset delta */
    if ((status = read_varint(p, n, &pos, &z)) != VARINT_OK) goto varint_failed;
    r->offset = (i128)base_offset + unzigzag(z);
    if (read_nullable(p, n, &pos, "key", &r->key_start, &r->key_end) < 0) return -1;
    if (read_nullable(p, n, &pos, "value", &r->value_start, &r->value_end) < 0) return -1;
    /* headers. The key and value lie inside the buffer from here on: had either run past it, the read at pos would
     * have failed. Header value slices are clamped instead, as the reference's slices are. */
    if (pos >= n) {
        corrupt("record runs past the end of the batch");
        return -1;
    }
    PyObject *headers;
    if (p[(Py_ssize_t)pos] == 0) {
        headers = Py_NewRef(no_headers);
        pos += 1;
    } else {
        headers = read_headers(p, n, &pos);
        if (!headers) return -1;
    }
    if (pos != record_end) {
        Py_DECREF(headers);
        corrupt_two("record fields end at byte %S, its length says %S", pos, record_end);
        return -1;
    }
    if (keep_headers)
        r->headers = headers;
    else
        Py_DECREF(headers);
    *pos_io = pos;
    return 0;
varint_failed:
    varint_error(status);
    return -1;
}

/* Raise the reference's "{count} records end at byte {pos}, the batch at {end}". */
static void records_end_mismatch(long long count, i128 pos, long long end) {
    PyObject *pc = PyLong_FromLongLong(count);
    if (!pc) return;
    PyObject *pp = py_from_i128(pos);
    if (pp) {
        PyObject *message = PyUnicode_FromFormat("%S records end at byte %S, the batch at %lld", pc, pp, end);
        if (message) {
            PyErr_SetObject(CorruptRecordError, message);
            Py_DECREF(message);
        }
        Py_DECREF(pp);
    }
    Py_DECREF(pc);
}

/* The arguments decode_records and scan_records share: data, pos, end, count, base_offset. */
typedef struct {
    Py_buffer view;
    const uint8_t *p;
    Py_ssize_t n;
    long long start, end, count, base_offset;
} Section;

static int section_args(PyObject *const *args, Section *s) {
    if (to_position(args[1], "pos", &s->start) < 0) return -1;
    s->end = PyLong_AsLongLong(args[2]);
    if (s->end == -1 && PyErr_Occurred()) return -1;
    s->count = PyLong_AsLongLong(args[3]);
    if (s->count == -1 && PyErr_Occurred()) return -1;
    s->base_offset = PyLong_AsLongLong(args[4]);
    if (s->base_offset == -1 && PyErr_Occurred()) return -1;
    if (get_buffer(args[0], &s->view) < 0) return -1;
    s->p = s->view.buf;
    s->n = s->view.len;
    return 0;
}

/* How many items to allocate up front: every record takes at least 7 bytes of the buffer, so a count above that
 * fails anyway, and only a count below it is trusted. */
static Py_ssize_t section_capacity(const Section *s) {
    return (s->count > 0 && s->start <= s->n && s->count <= (s->n - s->start) / 7) ? (Py_ssize_t)s->count : 0;
}

/* decode_records(data, pos, end, count, base_offset, base_timestamp, timestamp, record_type, leading, middle) */
static PyObject *decode_records(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 10) {
        PyErr_Format(PyExc_TypeError, "decode_records takes 10 arguments (%zd given)", nargs);
        return NULL;
    }
    long long base_timestamp, fixed_timestamp = 0;
    base_timestamp = PyLong_AsLongLong(args[5]);
    if (base_timestamp == -1 && PyErr_Occurred()) return NULL;
    int fixed = args[6] != Py_None;
    if (fixed) {
        fixed_timestamp = PyLong_AsLongLong(args[6]);
        if (fixed_timestamp == -1 && PyErr_Occurred()) return NULL;
    }
    PyObject *record_type = args[7], *leading = args[8], *middle = args[9];
    if (!PyType_Check(record_type) || !PyType_IsSubtype((PyTypeObject *)record_type, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "record_type must be a tuple type");
        return NULL;
    }
    if (!PyTuple_Check(leading) || !PyTuple_Check(middle)) {
        PyErr_SetString(PyExc_TypeError, "leading and middle must be tuples");
        return NULL;
    }
    PyTypeObject *tp = (PyTypeObject *)record_type;
    Py_ssize_t n_leading = PyTuple_GET_SIZE(leading), n_middle = PyTuple_GET_SIZE(middle);
    Py_ssize_t n_fields = n_leading + 2 + n_middle + 3;
    Section s;
    if (section_args(args, &s) < 0) return NULL;
    const uint8_t *p = s.p;
    Py_ssize_t n = s.n;
    i128 pos = s.start;
    Py_ssize_t capacity = section_capacity(&s);
    PyObject *records = PyList_New(capacity);
    PyObject *no_headers = PyTuple_New(0);
    if (!records || !no_headers) goto failed;
    for (long long i = 0; i < s.count; i++) {
        Parsed r;
        if (parse_record(p, n, &pos, s.base_offset, base_timestamp, no_headers, 1, &r) < 0) goto failed;
        if (fixed) r.timestamp = fixed_timestamp;
        PyObject *record = tp == &PyTuple_Type ? PyTuple_New(n_fields) : tp->tp_alloc(tp, n_fields);
        if (!record) {
            Py_DECREF(r.headers);
            goto failed;
        }
        PyObject **items = ((PyTupleObject *)record)->ob_item;
        Py_ssize_t k = 0;
        for (Py_ssize_t j = 0; j < n_leading; j++) items[k++] = Py_NewRef(PyTuple_GET_ITEM(leading, j));
        items[k++] = py_from_i128(r.offset);
        items[k++] = py_from_i128(r.timestamp);
        for (Py_ssize_t j = 0; j < n_middle; j++) items[k++] = Py_NewRef(PyTuple_GET_ITEM(middle, j));
        items[k++] = r.key_start < 0 ? Py_NewRef(Py_None) : slice(p, n, r.key_start, r.key_end);
        items[k++] = r.value_start < 0 ? Py_NewRef(Py_None) : slice(p, n, r.value_start, r.value_end);
        items[k++] = r.headers;
        if (!items[n_leading] || !items[n_leading + 1] || !items[n_fields - 3] || !items[n_fields - 2]) {
            Py_DECREF(record); /* tuple dealloc skips the NULL items */
            goto failed;
        }
        untrack_if_atomic(record);
        if (list_put(records, capacity, i, record) < 0) goto failed;
    }
    if (pos != s.end) {
        records_end_mismatch(s.count, pos, s.end);
        goto failed;
    }
    Py_DECREF(no_headers);
    PyBuffer_Release(&s.view);
    return records;
failed:
    /* A preallocated list may hold NULL items past the records decoded so far: list dealloc skips them. */
    Py_XDECREF(records);
    Py_XDECREF(no_headers);
    PyBuffer_Release(&s.view);
    return NULL;
}

/* scan_records(data, pos, end, count, base_offset, pause) -> (offsets, keys, starts, tombstones) */
static PyObject *scan_records(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 6) {
        PyErr_Format(PyExc_TypeError, "scan_records takes 6 arguments (%zd given)", nargs);
        return NULL;
    }
    PyObject *pause = args[5];
    Section s;
    if (section_args(args, &s) < 0) return NULL;
    const uint8_t *p = s.p;
    Py_ssize_t n = s.n;
    i128 pos = s.start;
    Py_ssize_t capacity = section_capacity(&s);
    PyObject *offsets = PyList_New(capacity), *keys = PyList_New(capacity), *starts = PyList_New(capacity + 1);
    PyObject *tombstones = PyList_New(0), *no_headers = PyTuple_New(0), *result = NULL;
    if (!offsets || !keys || !starts || !tombstones || !no_headers) goto done;
    if (list_put(starts, capacity + 1, 0, PyLong_FromLongLong(s.start)) < 0) goto done;
    for (long long i = 0; i < s.count; i++) {
        if ((i & (SCAN_PAUSE_EVERY - 1)) == SCAN_PAUSE_EVERY - 1) {
            PyObject *paused = PyObject_CallNoArgs(pause);
            if (!paused) goto done;
            Py_DECREF(paused);
        }
        Parsed r;
        if (parse_record(p, n, &pos, s.base_offset, 0, no_headers, 0, &r) < 0) goto done;
        if (list_put(offsets, capacity, i, py_from_i128(r.offset)) < 0) goto done;
        PyObject *key = r.key_start < 0 ? Py_NewRef(Py_None) : slice(p, n, r.key_start, r.key_end);
        if (list_put(keys, capacity, i, key) < 0) goto done;
        if (r.value_start < 0) {
            PyObject *index = PyLong_FromLongLong(i);
            if (!index || PyList_Append(tombstones, index) < 0) {
                Py_XDECREF(index);
                goto done;
            }
            Py_DECREF(index);
        }
        if (list_put(starts, capacity + 1, i + 1, py_from_i128(pos)) < 0) goto done;
    }
    if (pos != s.end) {
        records_end_mismatch(s.count, pos, s.end);
        goto done;
    }
    result = PyTuple_Pack(4, offsets, keys, starts, tombstones);
done:
    Py_XDECREF(offsets);
    Py_XDECREF(keys);
    Py_XDECREF(starts);
    Py_XDECREF(tombstones);
    Py_XDECREF(no_headers);
    PyBuffer_Release(&s.view);
    return result;
}

/* ---------------------------------------------------------------------------------------------------------------
 * Encoding */

static inline uint64_t zigzag(int64_t v) { return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63); }

static inline Py_ssize_t varint_size(uint64_t z) {
    Py_ssize_t size = 1;
    while (z >= 0x80) {
        z >>= 7;
        size++;
    }
    return size;
}

static inline char *put_varint(char *out, uint64_t z) {
    while (z >= 0x80) {
        *out++ = (char)((z & 0x7F) | 0x80);
        z >>= 7;
    }
    *out++ = (char)z;
    return out;
}

/* A key, value or header value: null (None) or bytes-like. */
typedef struct {
    const char *data;
    Py_ssize_t size;
    int null;
    int has_view;
    Py_buffer view;
} Field;

static int field_get(PyObject *obj, Field *f) {
    f->has_view = 0;
    f->null = obj == Py_None;
    f->data = NULL;
    f->size = 0;
    if (f->null) return 0;
    if (PyBytes_CheckExact(obj)) {
        f->data = PyBytes_AS_STRING(obj);
        f->size = PyBytes_GET_SIZE(obj);
        return 0;
    }
    if (PyObject_GetBuffer(obj, &f->view, PyBUF_SIMPLE) < 0) return -1;
    f->has_view = 1;
    f->data = f->view.buf;
    f->size = f->view.len;
    return 0;
}

static void field_release(Field *f) {
    if (f->has_view) PyBuffer_Release(&f->view);
    f->has_view = 0;
}

static inline Py_ssize_t field_encoded_size(const Field *f) {
    return f->null ? 1 : varint_size(zigzag(f->size)) + f->size;
}

static inline char *put_field(char *out, const Field *f) {
    if (f->null) {
        *out++ = 1;
        return out;
    }
    out = put_varint(out, zigzag(f->size));
    if (f->size) memcpy(out, f->data, (size_t)f->size);
    return out + f->size;
}

/* One header pair as a fast sequence of 2, its name's UTF-8 and its value. */
static int header_get(PyObject *pair, PyObject **fast, const char **name, Py_ssize_t *name_size, Field *value) {
    *fast = PySequence_Fast(pair, "a record header must be a (name, value) pair");
    if (!*fast) return -1;
    if (PySequence_Fast_GET_SIZE(*fast) != 2) {
        PyErr_SetString(PyExc_ValueError, "a record header must be a (name, value) pair");
        Py_CLEAR(*fast);
        return -1;
    }
    PyObject *name_obj = PySequence_Fast_GET_ITEM(*fast, 0);
    if (!PyUnicode_Check(name_obj)) {
        PyErr_SetString(PyExc_TypeError, "a record header name must be a str");
        Py_CLEAR(*fast);
        return -1;
    }
    *name = PyUnicode_AsUTF8AndSize(name_obj, name_size);
    if (!*name || field_get(PySequence_Fast_GET_ITEM(*fast, 1), value) < 0) {
        Py_CLEAR(*fast);
        return -1;
    }
    return 0;
}

/* The encoded size of a record's headers (None or empty: the one byte of a zero count); -1 on error. */
static Py_ssize_t headers_size(PyObject *headers) {
    if (headers == Py_None) return 1;
    PyObject *fast = PySequence_Fast(headers, "record headers must be a sequence");
    if (!fast) return -1;
    Py_ssize_t count = PySequence_Fast_GET_SIZE(fast), size = varint_size(zigzag(count));
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *pair;
        const char *name;
        Py_ssize_t name_size;
        Field value;
        if (header_get(PySequence_Fast_GET_ITEM(fast, i), &pair, &name, &name_size, &value) < 0) {
            Py_DECREF(fast);
            return -1;
        }
        size += varint_size(zigzag(name_size)) + name_size + field_encoded_size(&value);
        field_release(&value);
        Py_DECREF(pair);
    }
    Py_DECREF(fast);
    return size;
}

/* Write the headers measured by headers_size (which must have succeeded); *out advances. -1 if they changed. */
static int put_headers(char **out_io, PyObject *headers, Py_ssize_t expected) {
    char *out = *out_io, *start = out;
    if (headers == Py_None) {
        *out++ = 0;
        *out_io = out;
        return 0;
    }
    PyObject *fast = PySequence_Fast(headers, "record headers must be a sequence");
    if (!fast) return -1;
    Py_ssize_t count = PySequence_Fast_GET_SIZE(fast);
    out = put_varint(out, zigzag(count));
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *pair;
        const char *name;
        Py_ssize_t name_size;
        Field value;
        if (header_get(PySequence_Fast_GET_ITEM(fast, i), &pair, &name, &name_size, &value) < 0) {
            Py_DECREF(fast);
            return -1;
        }
        Py_ssize_t need = varint_size(zigzag(name_size)) + name_size + field_encoded_size(&value);
        if ((out - start) + need > expected) { /* cannot happen without a buffer that changed size */
            field_release(&value);
            Py_DECREF(pair);
            Py_DECREF(fast);
            PyErr_SetString(PyExc_RuntimeError, "record headers changed while being encoded");
            return -1;
        }
        out = put_varint(out, zigzag(name_size));
        memcpy(out, name, (size_t)name_size);
        out = put_field(out + name_size, &value);
        field_release(&value);
        Py_DECREF(pair);
    }
    Py_DECREF(fast);
    if (out - start != expected) {
        PyErr_SetString(PyExc_RuntimeError, "record headers changed while being encoded");
        return -1;
    }
    *out_io = out;
    return 0;
}

/* A record's pieces, measured: everything encode needs to write it. */
typedef struct {
    int64_t offset_delta, timestamp_delta;
    Field key, value;
    PyObject *headers; /* borrowed; None when there are none */
    Py_ssize_t headers_size, body_size;
} Pending;

static int pending_measure(Pending *r, PyObject *key, PyObject *value, PyObject *headers) {
    r->key.has_view = r->value.has_view = 0;
    if (field_get(key, &r->key) < 0) return -1;
    if (field_get(value, &r->value) < 0) {
        field_release(&r->key);
        return -1;
    }
    if (headers != Py_None) {
        Py_ssize_t size = PyObject_Length(headers);
        if (size < 0) goto failed;
        if (size == 0) headers = Py_None;
    }
    r->headers = headers;
    r->headers_size = headers_size(headers);
    if (r->headers_size < 0) goto failed;
    r->body_size = 1 + varint_size(zigzag(r->timestamp_delta)) + varint_size(zigzag(r->offset_delta)) +
                   field_encoded_size(&r->key) + field_encoded_size(&r->value) + r->headers_size;
    return 0;
failed:
    field_release(&r->key);
    field_release(&r->value);
    return -1;
}

static inline Py_ssize_t pending_size(const Pending *r) { return varint_size(zigzag(r->body_size)) + r->body_size; }

/* Write a measured record and release its fields. */
static int pending_write(Pending *r, char **out_io) {
    char *out = put_varint(*out_io, zigzag(r->body_size));
    *out++ = 0; /* attributes */
    out = put_varint(out, zigzag(r->timestamp_delta));
    out = put_varint(out, zigzag(r->offset_delta));
    out = put_field(out, &r->key);
    out = put_field(out, &r->value);
    field_release(&r->key);
    field_release(&r->value);
    if (put_headers(&out, r->headers, r->headers_size) < 0) return -1;
    *out_io = out;
    return 0;
}

/* A delta as an int64: TypeError for a non-integer, OverflowError (varint.py's message) for an integer beyond int64,
 * whose zigzag varint could not decode to it. */
static int to_int64(PyObject *obj, int64_t *out) {
    int overflow;
    long long v = PyLong_AsLongLongAndOverflow(obj, &overflow);
    if (v == -1 && PyErr_Occurred()) return -1;
    if (overflow) {
        PyErr_Format(PyExc_OverflowError, "%S does not fit a signed 64-bit varint", obj);
        return -1;
    }
    *out = v;
    return 0;
}

/* encode_record(offset_delta, timestamp_delta, key, value, headers=()) */
static PyObject *encode_record(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs < 4 || nargs > 5) {
        PyErr_Format(PyExc_TypeError, "encode_record takes 4 or 5 arguments (%zd given)", nargs);
        return NULL;
    }
    Pending r;
    if (to_int64(args[0], &r.offset_delta) < 0 || to_int64(args[1], &r.timestamp_delta) < 0) return NULL;
    if (pending_measure(&r, args[2], args[3], nargs == 5 ? args[4] : Py_None) < 0) return NULL;
    PyObject *result = PyBytes_FromStringAndSize(NULL, pending_size(&r));
    if (!result) {
        field_release(&r.key);
        field_release(&r.value);
        return NULL;
    }
    char *out = PyBytes_AS_STRING(result);
    if (pending_write(&r, &out) < 0) {
        Py_DECREF(result);
        return NULL;
    }
    return result;
}

/* encode_records(values, keys, timestamp_deltas, headers): the records section, record i with offset delta i. */
static PyObject *encode_records(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 4) {
        PyErr_Format(PyExc_TypeError, "encode_records takes 4 arguments (%zd given)", nargs);
        return NULL;
    }
    PyObject *values = NULL, *keys = NULL, *deltas = NULL, *headers = NULL, *out_bytes = NULL;
    /* Tuples: their items stay referenced whatever Python code a __len__ or buffer getter might run. */
    values = PySequence_Tuple(args[0]);
    if (!values) goto failed;
    Py_ssize_t count = PyTuple_GET_SIZE(values);
    PyObject **fasts[3] = {&keys, &deltas, &headers};
    for (int j = 0; j < 3; j++) {
        PyObject *arg = args[j + 1];
        if (arg == Py_None) continue;
        *fasts[j] = PySequence_Tuple(arg);
        if (!*fasts[j]) goto failed;
        if (PyTuple_GET_SIZE(*fasts[j]) < count) {
            PyErr_SetString(PyExc_IndexError, "fewer keys, timestamp deltas or headers than values");
            goto failed;
        }
    }
    Py_ssize_t capacity = count * 16 + 64, used = 0;
    out_bytes = PyBytes_FromStringAndSize(NULL, capacity);
    if (!out_bytes) goto failed;
    for (Py_ssize_t i = 0; i < count; i++) {
        Pending r;
        r.offset_delta = i;
        r.timestamp_delta = 0;
        if (deltas && to_int64(PyTuple_GET_ITEM(deltas, i), &r.timestamp_delta) < 0) goto failed;
        if (pending_measure(&r, keys ? PyTuple_GET_ITEM(keys, i) : Py_None, PyTuple_GET_ITEM(values, i),
                            headers ? PyTuple_GET_ITEM(headers, i) : Py_None) < 0)
            goto failed;
        Py_ssize_t size = pending_size(&r);
        if (used + size > capacity) {
            while (used + size > capacity) capacity *= 2;
            if (_PyBytes_Resize(&out_bytes, capacity) < 0) { /* frees out_bytes and sets it to NULL on failure */
                field_release(&r.key);
                field_release(&r.value);
                goto failed;
            }
        }
        char *out = PyBytes_AS_STRING(out_bytes) + used;
        if (pending_write(&r, &out) < 0) goto failed;
        used += size;
    }
    if (_PyBytes_Resize(&out_bytes, used) < 0) goto failed;
    Py_DECREF(values);
    Py_XDECREF(keys);
    Py_XDECREF(deltas);
    Py_XDECREF(headers);
    return out_bytes;
failed:
    Py_XDECREF(values);
    Py_XDECREF(keys);
    Py_XDECREF(deltas);
    Py_XDECREF(headers);
    Py_XDECREF(out_bytes);
    return NULL;
}

/* ---------------------------------------------------------------------------------------------------------------
 * The module */

static PyMethodDef methods[] = {
    {"append_batches", (PyCFunction)(void (*)(void))append_batches, METH_FASTCALL,
     "append_batches(buf, view, max_batch_size, check_records, /): AppendBatch tuples, or a bad batch's position."},
    {"records_end", (PyCFunction)(void (*)(void))records_end, METH_FASTCALL,
     "records_end(buf, pos, count, /): where count records end by their length prefixes, or -1."},
    {"decode_records", (PyCFunction)(void (*)(void))decode_records, METH_FASTCALL,
     "decode_records(data, pos, end, count, base_offset, base_timestamp, timestamp, record_type, leading, middle, /)"},
    {"scan_records", (PyCFunction)(void (*)(void))scan_records, METH_FASTCALL,
     "scan_records(data, pos, end, count, base_offset, pause, /): (offsets, keys, starts, tombstones)."},
    {"encode_record", (PyCFunction)(void (*)(void))encode_record, METH_FASTCALL,
     "encode_record(offset_delta, timestamp_delta, key, value, headers=(), /): one record, length included."},
    {"encode_records", (PyCFunction)(void (*)(void))encode_records, METH_FASTCALL,
     "encode_records(values, keys, timestamp_deltas, headers, /): a records section."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "odradek.client.record._native",
    "The native record codec: reference.py's functions in C (see record/codec.py).", -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__native(void) {
    PyObject *errors = PyImport_ImportModule("odradek.client.errors");
    if (!errors) return NULL;
    CorruptRecordError = PyObject_GetAttrString(errors, "CorruptRecordError");
    Py_DECREF(errors);
    if (!CorruptRecordError) return NULL;
    PyObject *crc32c_module = PyImport_ImportModule("crc32c");
    if (!crc32c_module) {
        Py_CLEAR(CorruptRecordError);
        return NULL;
    }
    crc32c_function = PyObject_GetAttrString(crc32c_module, "crc32c");
    Py_DECREF(crc32c_module);
    PyObject *module = crc32c_function ? PyModule_Create(&module_def) : NULL;
    if (!module) {
        Py_CLEAR(CorruptRecordError);
        Py_CLEAR(crc32c_function);
        return NULL;
    }
    return module;
}
