/* One pass over a chunk of runtime-log lines: the common event shapes cut into columns, every other line sorted.
 *
 * The native twin of log_columns' RE2 passes (see log_columns.py for the shapes; the tests hold both to the
 * line-by-line reference): for each line of buf[1:stop] (each ends in '\n', buf[0] is a '\n') it decides
 *   - fast: one of the four common shapes (`_EITHER` there) with an id of at most 64 characters that is neither
 *     dashes only nor hiding an exception's name, and numbers of at most 18 digits: its fields become columns;
 *   - slow: one of the four shapes whose id or numbers fail those checks (the reference judges it);
 *   - rest: a candidate of another shape (`_CANDIDATE` there: a request id and an event word, or an exception's
 *     name): the rare shapes' RE2 pass, then the reference, judge it;
 *   - blank (`_BLANK` there), or noise.
 * A stamp's seconds are left to Python (its calendar, cached per second); the fraction is computed here exactly as
 * Python's int(frac) / 10 ** len(frac) (both exact doubles, one correctly rounded division).
 * The GIL is released while it runs: chunks are recognised on every core by the scan's worker threads.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define ID_MAX 64
#define DIGITS_MAX 18

static const double POW10[] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9};

typedef struct {
    const char *text;
    size_t len;
} Needle;

#define N(s) {s, sizeof(s) - 1}
static const Needle EVENT_WORDS[] = {N("wrote"), N("encode_image"), N("first"), N("stitch"), N("concat"), N("consumed")};
static const Needle EXC_NAMES[] = {N("TokenStreamDesync"), N("VisualEmbeddingShapeMismatch"),
                                   N("CrossAttentionIndexOutOfBounds")};
static const Needle LEVELS[] = {N("DEBUG "), N("INFO "), N("WARN "), N("WARNING "), N("ERROR "), N("TRACE ")};
/* In log_columns._WHERE's order: the index is the kind's position there. */
static const Needle WHERES[] = {N("VisualEncoder::encode_image: request_id="), N("Generator::decode: request_id="),
                                N("VisualEncoder::write_buffer: request_id="), N("TokenSynchronizer::stitch: request_id=")};
static const Needle SHORT_TAILS[] = {N("start"), N("first_token")};
static const Needle LONG_VERBS[] = {N("wrote "), N("consumed ")};
static const Needle TOKENS_AT = N(" tokens at offset ");

static inline int is_digit(char c) { return (unsigned char)(c - '0') < 10; }

static inline int is_id_char(char c) {
    return is_digit(c) || (unsigned char)((c | 0x20) - 'a') < 26 || c == '-';
}

static inline int is_blank_char(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\x0b' || c == '\x0c'; }

/* Whether [*p, e) starts with the needle; moves *p past it when it does. */
static inline int take(const char **p, const char *e, const Needle *n) {
    if ((size_t)(e - *p) < n->len || memcmp(*p, n->text, n->len) != 0)
        return 0;
    *p += n->len;
    return 1;
}

static inline int contains(const char *s, size_t n, const Needle *needle) {
    return memmem(s, n, needle->text, needle->len) != NULL;
}

static int has_exc_name(const char *s, size_t n) {
    for (size_t k = 0; k < sizeof EXC_NAMES / sizeof *EXC_NAMES; k++)
        if (contains(s, n, &EXC_NAMES[k]))
            return 1;
    return 0;
}

/* `_CANDIDATE`: a request id and an event word (in either order: none of the words overlaps "request_id"), or an
 * exception's name. A superset would only send more lines to the slower judges; this is the exact set. */
static int is_candidate(const char *s, size_t n) {
    static const Needle RID = N("request_id");
    if (contains(s, n, &RID))
        for (size_t k = 0; k < sizeof EVENT_WORDS / sizeof *EVENT_WORDS; k++)
            if (contains(s, n, &EVENT_WORDS[k]))
                return 1;
    return has_exc_name(s, n);
}

/* A run of digits at *p: its length (0: none); *p moves past it. */
static inline size_t digits(const char **p, const char *e) {
    const char *q = *p;
    while (q < e && is_digit(*q))
        q++;
    size_t k = (size_t)(q - *p);
    *p = q;
    return k;
}

static inline int64_t value(const char *s, size_t k) {
    int64_t v = 0;
    for (size_t i = 0; i < k; i++)
        v = v * 10 + (s[i] - '0');
    return v;
}

typedef struct {
    int where;
    const char *rid;
    size_t rid_len;
    const char *n1, *n2;
    size_t n1_len, n2_len;
    double frac;
} Fast;

enum { NOT_FAST = 0, FAST = 1, FAST_SHAPE_ONLY = 2 };

/* Line [s, e) without its '\n': FAST (fields in f), FAST_SHAPE_ONLY (the shape, but the reference must judge its id
 * or numbers), or NOT_FAST. */
static int fast_shape(const char *s, const char *e, Fast *f) {
    static const char STAMP[] = "dddd-dd-ddTdd:dd:dd";
    if (e > s && e[-1] == '\r')
        e--;
    if (e - s < 21)
        return NOT_FAST;
    for (int i = 0; i < 19; i++)
        if (STAMP[i] == 'd' ? !is_digit(s[i]) : s[i] != STAMP[i])
            return NOT_FAST;
    const char *p = s + 19;
    f->frac = 0.0;
    if (*p == '.') {
        p++;
        const char *start = p;
        size_t k = digits(&p, e);
        if (k == 0 || k > 9)
            return NOT_FAST;
        f->frac = (double)value(start, k) / POW10[k];
    }
    if (e - p < 2 || p[0] != 'Z' || p[1] != ' ')
        return NOT_FAST;
    p += 2;
    int level = 0;
    for (size_t k = 0; k < sizeof LEVELS / sizeof *LEVELS && !level; k++)
        level = take(&p, e, &LEVELS[k]);
    if (!level)
        return NOT_FAST;
    f->where = -1;
    for (int k = 0; k < 4 && f->where < 0; k++)
        if (take(&p, e, &WHERES[k]))
            f->where = k;
    if (f->where < 0)
        return NOT_FAST;
    f->rid = p;
    while (p < e && is_id_char(*p))
        p++;
    f->rid_len = (size_t)(p - f->rid);
    if (f->rid_len == 0 || p >= e || *p != ' ')
        return NOT_FAST;
    p++;
    if (f->where < 2) {  /* the short shapes: encode_image ... start, decode ... first_token */
        if (!take(&p, e, &SHORT_TAILS[f->where]) || p != e)
            return NOT_FAST;
        f->n1 = f->n2 = NULL;
        f->n1_len = f->n2_len = 0;
    } else {
        if (!take(&p, e, &LONG_VERBS[f->where - 2]))
            return NOT_FAST;
        f->n1 = p;
        f->n1_len = digits(&p, e);
        if (f->n1_len == 0 || !take(&p, e, &TOKENS_AT))
            return NOT_FAST;
        f->n2 = p;
        f->n2_len = digits(&p, e);
        if (f->n2_len == 0 || p != e)
            return NOT_FAST;
    }
    /* log_columns._fields' checks; a line failing them is the reference's to judge */
    if (f->rid_len > ID_MAX || f->n1_len > DIGITS_MAX || f->n2_len > DIGITS_MAX)
        return FAST_SHAPE_ONLY;
    size_t dashes = 0;
    while (dashes < f->rid_len && f->rid[dashes] == '-')
        dashes++;
    if (dashes == f->rid_len || has_exc_name(f->rid, f->rid_len))
        return FAST_SHAPE_ONLY;
    return FAST;
}

static int blank_line(const char *s, const char *e) {
    for (; s < e; s++)
        if (!is_blank_char(*s))
            return 0;
    return 1;
}

typedef struct {
    Py_ssize_t n_lines, n_blank, n_fast, n_runs, n_slow, n_rest, rid_bytes;
    int32_t *starts, *run_of, *rid_off;
    int64_t *fast_at, *run_start, *n1, *n2, *slow_at, *rest_at;
    int8_t *where;
    uint8_t *is_long;
    double *frac;
    char *rid_data;
} Out;

static void out_free(Out *o) {
    void *all[] = {o->starts, o->run_of, o->rid_off, o->fast_at, o->run_start, o->n1, o->n2, o->slow_at, o->rest_at,
                   o->where, o->is_long, o->frac, o->rid_data};
    for (size_t k = 0; k < sizeof all / sizeof *all; k++)
        free(all[k]);
}

static int out_alloc(Out *o, Py_ssize_t n, Py_ssize_t bytes) {
    size_t m = (size_t)n + 1;
    o->starts = malloc(m * sizeof(int32_t));
    o->run_of = malloc(m * sizeof(int32_t));
    o->rid_off = malloc(m * sizeof(int32_t));
    o->fast_at = malloc(m * sizeof(int64_t));
    o->run_start = malloc(m * sizeof(int64_t));
    o->n1 = malloc(m * sizeof(int64_t));
    o->n2 = malloc(m * sizeof(int64_t));
    o->slow_at = malloc(m * sizeof(int64_t));
    o->rest_at = malloc(m * sizeof(int64_t));
    o->where = malloc(m);
    o->is_long = malloc(m);
    o->frac = malloc(m * sizeof(double));
    o->rid_data = malloc((size_t)bytes + 1);
    return o->starts && o->run_of && o->rid_off && o->fast_at && o->run_start && o->n1 && o->n2 && o->slow_at &&
           o->rest_at && o->where && o->is_long && o->frac && o->rid_data;
}

static void scan(const char *buf, Py_ssize_t stop, Out *o) {
    const char *end = buf + stop, *p = buf + 1, *prev_stamp = NULL;
    Py_ssize_t i = 0;
    o->starts[0] = 1;
    o->rid_off[0] = 0;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (nl == NULL)
            nl = end - 1; /* never: buf[stop - 1] is a '\n' */
        Fast f;
        int shape = fast_shape(p, nl, &f);
        if (shape == FAST) {
            Py_ssize_t k = o->n_fast++;
            o->fast_at[k] = i;
            o->where[k] = (int8_t)f.where;
            o->frac[k] = f.frac;
            if (prev_stamp == NULL || memcmp(prev_stamp, p, 19) != 0) {
                o->run_start[o->n_runs++] = p - buf;
                prev_stamp = p;
            }
            o->run_of[k] = (int32_t)(o->n_runs - 1);
            memcpy(o->rid_data + o->rid_bytes, f.rid, f.rid_len);
            o->rid_bytes += (Py_ssize_t)f.rid_len;
            o->rid_off[k + 1] = (int32_t)o->rid_bytes;
            o->is_long[k] = f.n1 != NULL;
            o->n1[k] = f.n1 ? value(f.n1, f.n1_len) : 0;
            o->n2[k] = f.n2 ? value(f.n2, f.n2_len) : 0;
        } else if (shape == FAST_SHAPE_ONLY) {
            o->slow_at[o->n_slow++] = i;
        } else if ((p < nl && is_blank_char(*p)) ? blank_line(p, nl) : p == nl) {
            o->n_blank++;
        } else if (is_candidate(p, (size_t)(nl - p))) {
            o->rest_at[o->n_rest++] = i;
        }
        p = nl + 1;
        o->starts[++i] = (int32_t)(p - buf);
    }
    o->n_lines = i;
}

static PyObject *as_bytes(const void *data, Py_ssize_t n) { return PyBytes_FromStringAndSize((const char *)data, n); }

PyDoc_STRVAR(scan_block_doc,
             "scan_block(buf, stop) -> (lines, blank, starts, fast_at, where, run_of, run_start, frac, rid_offsets, "
             "rid_data, tokens, offset, is_long, slow_at, rest_at): the lines of buf[1:stop] sorted and the common "
             "shapes' fields, as bytes of little arrays (see log_columns._scan_native).");

static PyObject *scan_block(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer view;
    Py_ssize_t stop;
    if (!PyArg_ParseTuple(args, "y*n", &view, &stop))
        return NULL;
    if (stop < 1 || stop > view.len || ((const char *)view.buf)[0] != '\n' ||
        ((const char *)view.buf)[stop - 1] != '\n' || stop > INT32_MAX) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "scan_block: buf[0] and buf[stop - 1] must be newlines, stop within buf");
        return NULL;
    }
    const char *buf = view.buf;
    Py_ssize_t lines = 0;
    for (const char *p = buf + 1, *e = buf + stop; (p = memchr(p, '\n', (size_t)(e - p))) != NULL; p++)
        lines++;
    Out o;
    memset(&o, 0, sizeof o);
    if (!out_alloc(&o, lines, stop)) {
        out_free(&o);
        PyBuffer_Release(&view);
        return PyErr_NoMemory();
    }
    Py_BEGIN_ALLOW_THREADS
    scan(buf, stop, &o);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    Py_ssize_t nf = o.n_fast;
    PyObject *result = Py_BuildValue(
        "nnNNNNNNNNNNNNN", o.n_lines, o.n_blank, as_bytes(o.starts, (o.n_lines + 1) * 4), as_bytes(o.fast_at, nf * 8),
        as_bytes(o.where, nf), as_bytes(o.run_of, nf * 4), as_bytes(o.run_start, o.n_runs * 8), as_bytes(o.frac, nf * 8),
        as_bytes(o.rid_off, (nf + 1) * 4), as_bytes(o.rid_data, o.rid_bytes), as_bytes(o.n1, nf * 8),
        as_bytes(o.n2, nf * 8), as_bytes(o.is_long, nf), as_bytes(o.slow_at, o.n_slow * 8), as_bytes(o.rest_at, o.n_rest * 8));
    out_free(&o);
    return result;
}

static PyMethodDef METHODS[] = {{"scan_block", scan_block, METH_VARARGS, scan_block_doc}, {NULL, NULL, 0, NULL}};

static struct PyModuleDef MODULE = {PyModuleDef_HEAD_INIT, "_logscan",
                                    "One native pass over a chunk of runtime-log lines (see log_columns).", -1, METHODS,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__logscan(void) { return PyModule_Create(&MODULE); }
