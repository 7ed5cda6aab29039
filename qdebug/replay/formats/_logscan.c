/* One pass over a chunk of runtime-log lines: every known event shape cut into columns, every other line sorted.
 *
 * The native twin of log_columns' RE2 passes (its patterns are the specification; the tests hold both to the
 * line-by-line reference). For each line of buf[1:stop] (each ends in '\n', buf[0] is a '\n') it decides:
 *   - a row: one of the four common shapes (`_EITHER` there) or of the four rare ones (`_RARE_SHAPES`), whose ids,
 *     numbers and exception names pass the checks `_fields` and `_rare_shapes` make: its fields become columns;
 *   - the reference's: a line of one of those shapes that fails a check, or any other candidate (`_CANDIDATE`: a
 *     request id and an event word, or an exception's name); log_line._scan_line judges it;
 *   - blank (`_BLANK`), or noise.
 * A stamp's seconds are left to Python (its calendar, cached per second, per run of equal stamps here); the fraction
 * is computed as Python's int(frac) / 10 ** len(frac) (two exact doubles, one correctly rounded division).
 * It also folds the common-shape rows by request id, the chunk's part of each request's summary (log_partials,
 * for log_sql): per id, its first such row, its last buffer write and its last sync, as row numbers. The verdict SQL
 * then merges a few partials per request instead of every event (the rare shapes' rows it still reads one by one).
 * The GIL is released while it runs: the scan's worker threads recognise chunks on every core.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#define ID_MAX 64
#define DIGITS_MAX 18
#define MESSAGE_MAX 500

static const double POW10[] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9};

typedef struct {
    const char *text;
    size_t len;
} Needle;

#define N(s) {s, sizeof(s) - 1}
static const Needle LEVELS[] = {N("DEBUG "), N("INFO "), N("WARN "), N("WARNING "), N("ERROR "), N("TRACE ")};
static const Needle EXC_NAMES[] = {N("TokenStreamDesync"), N("VisualEmbeddingShapeMismatch"),
                                   N("CrossAttentionIndexOutOfBounds")}; /* the shortest first */
/* The common shapes, in log_columns._WHERE's order (the index is the kind's place in the kinds argument). */
static const Needle WHERES[] = {N("VisualEncoder::encode_image: request_id="), N("Generator::decode: request_id="),
                                N("VisualEncoder::write_buffer: request_id="), N("TokenSynchronizer::stitch: request_id=")};
static const Needle SHORT_TAILS[] = {N("start"), N("first_token")};
static const Needle LONG_VERBS[] = {N("wrote "), N("consumed ")};
static const Needle TOKENS_AT = N(" tokens at offset ");
static const Needle REQUEST_ID = N("request_id");

static const char STAMP[] = "dddd-dd-ddTdd:dd:dd"; /* a stamp's seconds: d a digit, else the byte itself */

/* The rare shapes, in log_columns._RARE's order (kinds 4..7). */
enum { OVERWRITE = 4, DESYNC = 5, OUT_OF_BOUNDS = 6, SHAPE_MISMATCH = 7, KINDS = 8 };

/* _CANDIDATE's words, each found by a two-byte pair inside it (`at` bytes in: a pair rare in log text) */
typedef struct {
    Needle n;
    int at;
    int what; /* 1: the request id, 2: an event word, 4: an exception's name */
} Word;

/* The request id and the exception names first (FIRST_PASS of them): a line with neither is done after those four;
 * only a line with a request id is searched for the six event words. */
static const Word WORDS[] = {
    {N("request_id"), 2, 1},  {N("TokenStreamDesync"), 4, 4}, {N("VisualEmbeddingShapeMismatch"), 5, 4},
    {N("CrossAttentionIndexOutOfBounds"), 4, 4},
    {N("wrote"), 0, 2},       {N("encode_image"), 6, 2},      {N("first"), 0, 2},
    {N("stitch"), 3, 2},      {N("concat"), 2, 2},            {N("consumed"), 4, 2},
};
#define N_WORDS ((int)(sizeof WORDS / sizeof *WORDS))
#define FIRST_PASS 4

static inline int is_digit(char c) { return (unsigned char)(c - '0') < 10; }

static inline int is_id_char(char c) {
    return is_digit(c) || (unsigned char)((c | 0x20) - 'a') < 26 || c == '-';
}

static inline int is_alpha(char c) { return (unsigned char)((c | 0x20) - 'a') < 26; }

static inline int is_blank_char(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\x0b' || c == '\x0c'; }

static inline int is_printable(char c) { return c >= ' ' && c <= '~'; } /* [ -~] */

/* Whether [*p, e) starts with the needle; moves *p past it when it does. */
static inline int take(const char **p, const char *e, const Needle *n) {
    if ((size_t)(e - *p) < n->len || memcmp(*p, n->text, n->len) != 0)
        return 0;
    *p += n->len;
    return 1;
}

static inline const char *find(const char *s, size_t n, const Needle *needle) {
    return memmem(s, n, needle->text, needle->len);
}

static int has_exc_name(const char *s, size_t n) {
    if (n < EXC_NAMES[0].len) /* the shortest: most ids are far shorter than any name */
        return 0;
    for (size_t k = 0; k < sizeof EXC_NAMES / sizeof *EXC_NAMES; k++)
        if (find(s, n, &EXC_NAMES[k]))
            return 1;
    return 0;
}

#if defined(__GNUC__)
#define INLINE static inline __attribute__((always_inline)) /* constant word ranges: each call site unrolled */
#else
#define INLINE static inline
#endif

/* Which of words w0..w1 start at s[j] (j the place of a word's pair), as the `what` bits. */
INLINE int words_at(const char *s, size_t n, size_t j, int w0, int w1) {
    int got = 0;
    for (int w = w0; w < w1; w++) {
        const Word *word = &WORDS[w];
        if (s[j] == word->n.text[word->at] && j + 1 < n && s[j + 1] == word->n.text[word->at + 1] &&
            j >= (size_t)word->at && n - (j - word->at) >= word->n.len &&
            memcmp(s + j - word->at, word->n.text, word->n.len) == 0)
            got |= word->what;
    }
    return got;
}

#if defined(__GNUC__)
typedef unsigned char v16 __attribute__((vector_size(16)));
static v16 FIRST[N_WORDS], SECOND[N_WORDS]; /* each word's pair, broadcast (set when the module loads) */

static v16 STAMP_BASE, STAMP_SPAN; /* per byte of a stamp's first 16: '0' and 10 for a digit, the separator and 1 */

static void init_pairs(void) {
    for (int w = 0; w < N_WORDS; w++)
        for (int k = 0; k < 16; k++) {
            FIRST[w][k] = (unsigned char)WORDS[w].n.text[WORDS[w].at];
            SECOND[w][k] = (unsigned char)WORDS[w].n.text[WORDS[w].at + 1];
        }
    for (int k = 0; k < 16; k++) {
        STAMP_BASE[k] = STAMP[k] == 'd' ? '0' : (unsigned char)STAMP[k];
        STAMP_SPAN[k] = STAMP[k] == 'd' ? 10 : 1;
    }
}

/* `\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}` at s (19 bytes there): its first 16 bytes checked at once. */
static inline int stamp_at(const char *s) {
    v16 a;
    memcpy(&a, s, 16);
    v16 ok = (v16)((v16)(a - STAMP_BASE) < STAMP_SPAN);
    uint64_t half[2];
    memcpy(half, &ok, 16);
    return (half[0] & half[1]) == ~(uint64_t)0 && s[16] == ':' && is_digit(s[17]) && is_digit(s[18]);
}

/* The `what` bits of words w0..w1 whose pair sits in s[j .. j + 16] (16 places), s + j + 17 <= s + n. */
INLINE int block_words(const char *s, size_t n, size_t j, int w0, int w1) {
    v16 a, b, hit = {0};
    memcpy(&a, s + j, 16);
    memcpy(&b, s + j + 1, 16);
    for (int w = w0; w < w1; w++)
        hit |= (v16)((a == FIRST[w]) & (b == SECOND[w]));
    int got = 0;
#if defined(__SSE2__)
    for (unsigned m = (unsigned)_mm_movemask_epi8((__m128i)hit); m; m &= m - 1) /* the places that matched, alone */
        got |= words_at(s, n, j + (size_t)__builtin_ctz(m), w0, w1);
#else
    uint64_t half[2];
    memcpy(half, &hit, 16);
    if (!(half[0] | half[1]))
        return 0;
    for (size_t k = 0; k < 16; k++)
        if (hit[k])
            got |= words_at(s, n, j + k, w0, w1);
#endif
    return got;
}
#else
static void init_pairs(void) {}

static inline int stamp_at(const char *s) {
    for (int i = 0; i < 19; i++)
        if (STAMP[i] == 'd' ? !is_digit(s[i]) : s[i] != STAMP[i])
            return 0;
    return 1;
}
#endif

/* The `what` bits of words w0..w1 in s[0 .. n), the search stopped once one of `enough` is found. Sixteen places at a
 * time, every word's pair compared at each; a place where one matches is checked whole. The last block overlaps the
 * one before it rather than leave a tail to a slower loop. */
INLINE int words_in(const char *s, size_t n, int w0, int w1, int enough) {
    int got = 0;
#if defined(__GNUC__)
    if (n >= 17) {
        for (size_t j = 0;; j += 16) {
            size_t at = j + 17 <= n ? j : n - 17;
            got |= block_words(s, n, at, w0, w1);
            if ((got & enough) || at + 17 >= n)
                return got;
        }
    }
#endif
    for (size_t j = 0; j < n && !(got & enough); j++)
        got |= words_at(s, n, j, w0, w1);
    return got;
}

/* `_CANDIDATE`: a request id and an event word (in either order: no word overlaps "request_id"), or an exception's
 * name. */
static int is_candidate(const char *s, size_t n) {
    int got = words_in(s, n, 0, FIRST_PASS, 4);
    if (got & 4)
        return 1;
    return (got & 1) && (words_in(s, n, FIRST_PASS, N_WORDS, 2) & 2);
}

/* A run of bytes of one class at *p (digits, or an id's [0-9A-Za-z-]): its length (0: none); *p moves past it. */
static inline size_t class_run(const char **p, const char *e, int (*in_class)(char)) {
    const char *q = *p;
    while (q < e && in_class(*q))
        q++;
    size_t k = (size_t)(q - *p);
    *p = q;
    return k;
}

static inline size_t digits(const char **p, const char *e) { return class_run(p, e, is_digit); }

static inline size_t id(const char **p, const char *e) { return class_run(p, e, is_id_char); }

static inline int64_t value(const char *s, size_t k) {
    int64_t v = 0;
    for (size_t i = 0; i < k; i++)
        v = v * 10 + (s[i] - '0');
    return v;
}

typedef struct {
    const char *s;
    size_t n; /* s == NULL: absent (null) */
} Span;

/* One row's fields as spans of the line. */
typedef struct {
    int kind;
    double frac;
    Span rid, donor, message, offset, text_offset, tokens;
} Fields;

/* `_HEAD` / `_RARE_HEAD`: `<stamp>[.<1-9 digits>]Z <LEVEL> `; *p moves past it. */
static int head(const char *s, const char *e, const char **p, double *frac) {
    if (e - s < 21 || !stamp_at(s))
        return 0;
    const char *q = s + 19;
    *frac = 0.0;
    if (*q == '.') {
        q++;
        const char *start = q;
        size_t k = digits(&q, e);
        if (k == 0 || k > 9)
            return 0;
        *frac = (double)value(start, k) / POW10[k];
    }
    if (e - q < 2 || q[0] != 'Z' || q[1] != ' ')
        return 0;
    q += 2;
    for (size_t k = 0; k < sizeof LEVELS / sizeof *LEVELS; k++)
        if (take(&q, e, &LEVELS[k])) {
            *p = q;
            return 1;
        }
    return 0;
}

static inline int short_enough(Span x, size_t most) { return x.s == NULL || x.n <= most; }

static inline int plain_id(Span x) { /* neither dashes only nor hiding an exception's name (`_ODD_RID`) */
    size_t dashes = 0;
    while (dashes < x.n && x.s[dashes] == '-')
        dashes++;
    return dashes < x.n && !has_exc_name(x.s, x.n);
}

enum { NO_SHAPE = 0, ROW = 1, REFERENCE = 2 };

/* The common shapes after the head: ROW, REFERENCE (the shape, but an id or number the checks refuse), NO_SHAPE. */
static int common_shape(const char *p, const char *e, Fields *f) {
    f->kind = -1;
    for (int k = 0; k < 4 && f->kind < 0; k++)
        if (take(&p, e, &WHERES[k]))
            f->kind = k;
    if (f->kind < 0)
        return NO_SHAPE;
    f->rid.s = p;
    f->rid.n = id(&p, e);
    if (f->rid.n == 0 || p >= e || *p++ != ' ')
        return NO_SHAPE;
    if (f->kind < 2) { /* encode_image ... start, decode ... first_token */
        if (!take(&p, e, &SHORT_TAILS[f->kind]) || p != e)
            return NO_SHAPE;
    } else {
        if (!take(&p, e, &LONG_VERBS[f->kind - 2]))
            return NO_SHAPE;
        f->tokens.s = p;
        f->tokens.n = digits(&p, e);
        if (f->tokens.n == 0 || !take(&p, e, &TOKENS_AT))
            return NO_SHAPE;
        f->offset.s = p;
        f->offset.n = digits(&p, e);
        if (f->offset.n == 0 || p != e)
            return NO_SHAPE;
    }
    int ok = f->rid.n <= ID_MAX && short_enough(f->tokens, DIGITS_MAX) && short_enough(f->offset, DIGITS_MAX) &&
             plain_id(f->rid);
    return ok ? ROW : REFERENCE;
}

/* `(?: \(request_id=(?P<r>ID)\))?` then the end: 1 when it matches (r set, or left absent), 0 when not. */
static int optional_rid_then_end(const char *p, const char *e, Span *rid) {
    static const Needle OPEN = N(" (request_id=");
    if (p == e)
        return 1;
    if (!take(&p, e, &OPEN))
        return 0;
    rid->s = p;
    rid->n = id(&p, e);
    return rid->n > 0 && e - p == 1 && *p == ')';
}

static int skip_letters_then(const char **p, const char *e, char c) {
    while (*p < e && is_alpha(**p))
        (*p)++;
    return *p < e && *(*p)++ == c;
}

/* `(?P<x>NUM)<literal>`: the number's span; 0 when the shape does not hold. */
static int number_then(const char **p, const char *e, Span *x, const Needle *literal) {
    x->s = *p;
    x->n = digits(p, e);
    return x->n > 0 && (literal == NULL || take(p, e, literal));
}

/* After an exception's name: `[A-Za-z]*:<lead>(?P<a>NUM)<middle>(?P<b>NUM)` and the optional ` (request_id=ID)` to
 * the end (the desync and index-out-of-bounds shapes): ROW, REFERENCE (a number or id too long) or NO_SHAPE. */
static int named_pair(const char *p, const char *e, const Needle *lead, Span *a, const Needle *middle, Span *b,
                      Span *rid) {
    if (!skip_letters_then(&p, e, ':') || !take(&p, e, lead) || !number_then(&p, e, a, middle) ||
        !number_then(&p, e, b, NULL) || !optional_rid_then_end(p, e, rid))
        return NO_SHAPE;
    return a->n <= DIGITS_MAX && b->n <= DIGITS_MAX && short_enough(*rid, ID_MAX) ? ROW : REFERENCE;
}

/* The rare shapes after the head (log_columns._RARE): ROW, REFERENCE (a check refused it), or NO_SHAPE. */
static int rare_shape(const char *line, const char *p, const char *e, Fields *f) {
    static const Needle OVER = N("VisualEncoder::write_buffer: request_id="), OVER_AT = N(" overwrote buffer at offset "),
                        WITH = N(" with "), TOKENS = N(" tokens"), PREVIOUSLY = N(" (previously "),
                        DESYNC_NAME = N("TokenStreamDesync"), VISUAL = N(" visual token offset "),
                        DIFFERS = N(" differs from textual offset "), OOB_NAME = N("CrossAttentionIndexOutOfBounds"),
                        TOKEN_INDEX = N(" token index "), EXCEEDS = N(" exceeds sequence length "),
                        SHAPE_NAME = N("VisualEmbeddingShapeMismatch");
    f->message.s = p;
    f->message.n = (size_t)(e - p);
    if (take(&p, e, &OVER)) {
        f->kind = OVERWRITE;
        f->donor.s = p;
        f->donor.n = id(&p, e);
        if (f->donor.n == 0 || !take(&p, e, &OVER_AT) || !number_then(&p, e, &f->offset, NULL))
            return NO_SHAPE;
        const char *before_with = p;
        if (take(&p, e, &WITH) && !(number_then(&p, e, &f->tokens, &TOKENS))) {
            p = before_with; /* the optional group fails whole: " (previously" must follow the offset */
            f->tokens.s = NULL;
        }
        if (!take(&p, e, &PREVIOUSLY))
            return NO_SHAPE;
        f->rid.s = p;
        f->rid.n = id(&p, e);
        if (f->rid.n == 0 || e - p != 1 || *p != ')')
            return NO_SHAPE;
        int ok = f->rid.n <= ID_MAX && f->donor.n <= ID_MAX && f->offset.n <= DIGITS_MAX &&
                 short_enough(f->tokens, DIGITS_MAX) && !has_exc_name(f->donor.s, f->donor.n) &&
                 !has_exc_name(f->rid.s, f->rid.n);
        return ok ? ROW : REFERENCE;
    }
    if (take(&p, e, &DESYNC_NAME)) {
        f->kind = DESYNC;
        return named_pair(p, e, &VISUAL, &f->offset, &DIFFERS, &f->text_offset, &f->rid);
    }
    if (take(&p, e, &OOB_NAME)) {
        f->kind = OUT_OF_BOUNDS;
        return named_pair(p, e, &TOKEN_INDEX, &f->offset, &EXCEEDS, &f->tokens, &f->rid);
    }
    if (take(&p, e, &SHAPE_NAME)) {
        f->kind = SHAPE_MISMATCH;
        if (!skip_letters_then(&p, e, ':'))
            return NO_SHAPE;
        /* `[ -~]*?[!-~](?: \(request_id=(?P<sr>ID)\))?` to the end, the lazy part as short as it can be: the id is
         * taken when the line ends in ` (request_id=ID)` after a printable non-space; else the whole rest must be
         * printable and end in a non-space. */
        for (const char *q = p; q < e; q++)
            if (!is_printable(*q))
                return NO_SHAPE;
        if (e - p < 1 || e[-1] == ' ')
            return NO_SHAPE;
        if (e[-1] == ')') {
            const char *q = e - 1;
            while (q > p && is_id_char(q[-1]))
                q--;
            static const Needle OPEN = N(" (request_id=");
            if (q < e - 1 && (size_t)(q - p) >= OPEN.len + 1 && memcmp(q - OPEN.len, OPEN.text, OPEN.len) == 0 &&
                q[-(long)OPEN.len - 1] != ' ') {
                f->rid.s = q;
                f->rid.n = (size_t)(e - 1 - q);
            }
        }
        /* its id (if any) is the line's only request_id: the reference reads the first one */
        size_t mentions = 0;
        for (const char *q = line; (q = find(q, (size_t)(e - q), &REQUEST_ID)) != NULL; q += REQUEST_ID.len)
            mentions++;
        int ok = short_enough(f->rid, ID_MAX) && mentions == (f->rid.s != NULL);
        return ok ? ROW : REFERENCE;
    }
    return NO_SHAPE;
}

/* Growing output columns (malloc'd; their sizes bounded by the chunk's lines and bytes, known up front). */
typedef struct {
    int32_t *off;
    uint8_t *valid;
    char *data;
    Py_ssize_t bytes;
} Strings;

typedef struct {
    int64_t *v;
    uint8_t *valid;
} Ints;

typedef struct {
    Py_ssize_t n_lines, n_blank, n_rows, n_runs, n_reference;
    int32_t *starts, *run_of;
    int64_t *at, *run_start, *reference;
    int8_t *kind;
    double *frac;
    Strings rid, donor, message;
    Ints offset, text_offset, tokens;
    /* the common-shape rows folded by request id: per id (in order of its first row) that row, its last write and
     * its last sync (-1: none), found through an open-addressing table of (id's partial + 1) */
    Py_ssize_t n_partials;
    int32_t *first, *write, *stitch, *slots;
    size_t slot_mask;
} Out;

static void out_free(Out *o) {
    void *all[] = {o->starts, o->run_of, o->at, o->run_start, o->reference, o->kind, o->frac,
                   o->rid.off, o->rid.valid, o->rid.data, o->donor.off, o->donor.valid, o->donor.data,
                   o->message.off, o->message.valid, o->message.data, o->offset.v, o->offset.valid,
                   o->text_offset.v, o->text_offset.valid, o->tokens.v, o->tokens.valid,
                   o->first, o->write, o->stitch, o->slots};
    for (size_t k = 0; k < sizeof all / sizeof *all; k++)
        free(all[k]);
}

static int strings_alloc(Strings *s, size_t rows, size_t bytes) {
    s->off = malloc((rows + 1) * sizeof(int32_t));
    s->valid = malloc(rows + 1);
    s->data = malloc(bytes + 1);
    if (s->off)
        s->off[0] = 0;
    return s->off && s->valid && s->data;
}

static int ints_alloc(Ints *x, size_t rows) {
    x->v = malloc((rows + 1) * sizeof(int64_t));
    x->valid = malloc(rows + 1);
    return x->v && x->valid;
}

static int out_alloc(Out *o, size_t lines, size_t bytes) {
    size_t m = lines + 1, slots = 16;
    while (slots < 2 * m) /* at most half full: a probe ends in a step or two */
        slots *= 2;
    o->slot_mask = slots - 1;
    o->slots = calloc(slots, sizeof(int32_t));
    o->first = malloc(m * sizeof(int32_t));
    o->write = malloc(m * sizeof(int32_t));
    o->stitch = malloc(m * sizeof(int32_t));
    o->starts = malloc(m * sizeof(int32_t));
    o->run_of = malloc(m * sizeof(int32_t));
    o->at = malloc(m * sizeof(int64_t));
    o->run_start = malloc(m * sizeof(int64_t));
    o->reference = malloc(m * sizeof(int64_t));
    o->kind = malloc(m);
    o->frac = malloc(m * sizeof(double));
    return o->slots && o->first && o->write && o->stitch && o->starts && o->run_of && o->at && o->run_start &&
           o->reference && o->kind && o->frac &&
           strings_alloc(&o->rid, lines, bytes) && strings_alloc(&o->donor, lines, bytes) &&
           strings_alloc(&o->message, lines, bytes) && ints_alloc(&o->offset, lines) &&
           ints_alloc(&o->text_offset, lines) && ints_alloc(&o->tokens, lines);
}

static void put_string(Strings *s, Py_ssize_t row, Span x, size_t most) {
    size_t n = x.s == NULL ? 0 : (x.n < most ? x.n : most);
    s->valid[row] = x.s != NULL && x.n > 0; /* an empty group is null, as log_columns has it */
    memcpy(s->data + s->bytes, x.s ? x.s : "", n);
    s->bytes += (Py_ssize_t)n;
    s->off[row + 1] = (int32_t)s->bytes;
}

static void put_int(Ints *x, Py_ssize_t row, Span d) {
    x->valid[row] = d.s != NULL && d.n > 0;
    x->v[row] = x->valid[row] ? value(d.s, d.n) : 0;
}

/* Row k (of a common shape: its id is there, whole) into its id's partial. */
static void fold(Out *o, Py_ssize_t k, int shape) {
    const char *id = o->rid.data + o->rid.off[k];
    size_t n = (size_t)(o->rid.off[k + 1] - o->rid.off[k]);
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (size_t j = 0; j < n; j++)
        h = (h ^ (unsigned char)id[j]) * 1099511628211ULL;
    size_t at = (size_t)(h ^ (h >> 32)) & o->slot_mask;
    int32_t p;
    for (;; at = (at + 1) & o->slot_mask) {
        if (o->slots[at] == 0) {
            p = (int32_t)o->n_partials++;
            o->slots[at] = p + 1;
            o->first[p] = (int32_t)k;
            o->write[p] = o->stitch[p] = -1;
            break;
        }
        p = o->slots[at] - 1;
        Py_ssize_t f = o->first[p];
        if ((size_t)(o->rid.off[f + 1] - o->rid.off[f]) == n && memcmp(o->rid.data + o->rid.off[f], id, n) == 0)
            break;
    }
    if (shape == 2) /* VisualEncoder::write_buffer */
        o->write[p] = (int32_t)k;
    else if (shape == 3) /* TokenSynchronizer::stitch */
        o->stitch[p] = (int32_t)k;
}

static void put_row(Out *o, const char *buf, const char *line, Py_ssize_t i, const Fields *f, const int8_t *kinds,
                    const char **prev_stamp) {
    Py_ssize_t k = o->n_rows++;
    o->at[k] = i;
    o->kind[k] = kinds[f->kind];
    o->frac[k] = f->frac;
    if (*prev_stamp == NULL || memcmp(*prev_stamp, line, 19) != 0) {
        o->run_start[o->n_runs++] = line - buf;
        *prev_stamp = line;
    }
    o->run_of[k] = (int32_t)(o->n_runs - 1);
    put_string(&o->rid, k, f->rid, ID_MAX);
    put_string(&o->donor, k, f->donor, ID_MAX);
    put_string(&o->message, k, f->message, MESSAGE_MAX);
    put_int(&o->offset, k, f->offset);
    put_int(&o->text_offset, k, f->text_offset);
    put_int(&o->tokens, k, f->tokens);
    if (f->kind < 4)
        fold(o, k, f->kind);
}

static int blank_line(const char *s, const char *e) {
    for (; s < e; s++)
        if (!is_blank_char(*s))
            return 0;
    return 1;
}

static void scan(const char *buf, Py_ssize_t stop, const int8_t *kinds, Py_ssize_t max_line, Out *o) {
    const char *end = buf + stop, *p = buf + 1, *prev_stamp = NULL;
    Py_ssize_t i = 0;
    o->starts[0] = 1;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p)); /* never NULL: buf[stop - 1] is a '\n' */
        const char *e = nl > p && nl[-1] == '\r' ? nl - 1 : nl; /* `\r?\n$` */
        Fields f = {0};
        const char *after_head = NULL;
        int got = head(p, e, &after_head, &f.frac) ? common_shape(after_head, e, &f) : NO_SHAPE;
        if (got == NO_SHAPE) {
            if ((p < nl && is_blank_char(*p)) ? blank_line(p, nl) : p == nl) {
                o->n_blank++;
            } else if (is_candidate(p, (size_t)(nl - p))) {
                double frac = f.frac;
                f = (Fields){0}; /* a common shape that failed half-way may have left spans */
                f.frac = frac;
                /* the rare shapes are matched on candidates only, on lines under MAX_LINE_BYTES; else the reference */
                if (after_head != NULL && nl - p < max_line)
                    got = rare_shape(p, after_head, e, &f);
                if (got == NO_SHAPE)
                    got = REFERENCE;
            }
        }
        if (got == ROW)
            put_row(o, buf, p, i, &f, kinds, &prev_stamp);
        else if (got == REFERENCE)
            o->reference[o->n_reference++] = i;
        p = nl + 1;
        o->starts[++i] = (int32_t)(p - buf);
    }
    o->n_lines = i;
}

static PyObject *as_bytes(const void *data, Py_ssize_t n) { return PyBytes_FromStringAndSize((const char *)data, n); }

static PyObject *strings_tuple(const Strings *s, Py_ssize_t rows) {
    return Py_BuildValue("NNN", as_bytes(s->off, (rows + 1) * 4), as_bytes(s->data, s->bytes), as_bytes(s->valid, rows));
}

static PyObject *ints_tuple(const Ints *x, Py_ssize_t rows) {
    return Py_BuildValue("NN", as_bytes(x->v, rows * 8), as_bytes(x->valid, rows));
}

PyDoc_STRVAR(scan_block_doc,
             "scan_block(buf, stop, kinds, max_line) -> (lines, blank, starts, at, kind, run_of, run_start, frac, rid, "
             "donor, message, offset, text_offset, tokens, reference, first, write, stitch): the lines of buf[1:stop] "
             "sorted and the known shapes' fields, as bytes of little arrays (see log_columns._native_parts); first, "
             "write, stitch: per request id of the common-shape rows, its first row, last write and last sync (int32 "
             "row numbers, -1: none). kinds: 8 int8 event kind codes (the common shapes, then the rare ones); "
             "max_line: log_line.MAX_LINE_BYTES.");

static PyObject *scan_block(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer view, kinds;
    Py_ssize_t stop, max_line;
    if (!PyArg_ParseTuple(args, "y*ny*n", &view, &stop, &kinds, &max_line))
        return NULL;
    const char *buf = view.buf;
    if (stop < 1 || stop > view.len || buf[0] != '\n' || buf[stop - 1] != '\n' || stop > INT32_MAX ||
        kinds.len != KINDS) {
        PyBuffer_Release(&view);
        PyBuffer_Release(&kinds);
        PyErr_SetString(PyExc_ValueError,
                        "scan_block: buf[0] and buf[stop - 1] must be newlines, stop within buf, 8 kind codes");
        return NULL;
    }
    Py_ssize_t lines = 0;
    for (const char *p = buf + 1, *e = buf + stop; (p = memchr(p, '\n', (size_t)(e - p))) != NULL; p++)
        lines++;
    Out o;
    memset(&o, 0, sizeof o);
    if (!out_alloc(&o, (size_t)lines, (size_t)stop)) {
        out_free(&o);
        PyBuffer_Release(&view);
        PyBuffer_Release(&kinds);
        return PyErr_NoMemory();
    }
    Py_BEGIN_ALLOW_THREADS
    scan(buf, stop, (const int8_t *)kinds.buf, max_line, &o);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    PyBuffer_Release(&kinds);
    Py_ssize_t n = o.n_rows;
    PyObject *result = Py_BuildValue(
        "nnNNNNNNNNNNNNNNNN", o.n_lines, o.n_blank, as_bytes(o.starts, (o.n_lines + 1) * 4), as_bytes(o.at, n * 8),
        as_bytes(o.kind, n), as_bytes(o.run_of, n * 4), as_bytes(o.run_start, o.n_runs * 8), as_bytes(o.frac, n * 8),
        strings_tuple(&o.rid, n), strings_tuple(&o.donor, n), strings_tuple(&o.message, n), ints_tuple(&o.offset, n),
        ints_tuple(&o.text_offset, n), ints_tuple(&o.tokens, n), as_bytes(o.reference, o.n_reference * 8),
        as_bytes(o.first, o.n_partials * 4), as_bytes(o.write, o.n_partials * 4), as_bytes(o.stitch, o.n_partials * 4));
    out_free(&o);
    return result;
}

static PyMethodDef METHODS[] = {{"scan_block", scan_block, METH_VARARGS, scan_block_doc}, {NULL, NULL, 0, NULL}};

static struct PyModuleDef MODULE = {PyModuleDef_HEAD_INIT, "_logscan",
                                    "One native pass over a chunk of runtime-log lines (see log_columns).", -1, METHODS,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__logscan(void) {
    init_pairs();
    return PyModule_Create(&MODULE);
}
