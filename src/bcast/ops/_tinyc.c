/* The compiled tiny path of bcast's binary operators (bcast.ops._tiny).
 *
 * A call on small, C-contiguous, aligned, native NumPy arrays of one dtype, under NumPy's
 * own (multidirectional) broadcasting, costs a NumPy ufunc about 500 ns on a 2-core Xeon,
 * most of it dispatch. This module does such a call in one C function: check the operands,
 * broadcast the shapes, allocate the result (or check ``out=``) and run a plain loop. The
 * loops compute what NumPy's loops compute, bit for bit: IEEE arithmetic in the dtype,
 * integers wrapping, comparisons giving bool, bools read as zero or not zero.
 *
 * Anything else -- another type, a dtype the operator does not allow, a layout, a size over
 * the limit, shapes that do not broadcast, an out= that overlaps an operand -- returns None,
 * and the Python tiny path (and behind it the full path, which explains) takes the call.
 *
 * binary(name, type_numbers, limit) makes the callable of one NumPy ufunc name for the given
 * dtype numbers (those the operator allows and the module has a loop for), up to ``limit``
 * result elements: f(a, b) or f(a, b, out).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>

#define N_TYPES (NPY_DOUBLE + 1) /* NPY_BOOL .. NPY_DOUBLE: the dtypes with loops here */

/* One loop: ``rows`` rows of n elements. Within a row a and b advance by sa, sb elements
 * (0 or 1), from one row to the next by ra, rb (any step, 0 included); o is written
 * row after row. One call walks the last two axes: a call per row costs as much as a row
 * of 64 doubles takes. */
typedef void (*loop_fn)(const char *a, const char *b, char *o, npy_intp n, npy_intp sa,
                        npy_intp sb, npy_intp rows, npy_intp ra, npy_intp rb);

/* The rows are written three times, for (1, 1), (1, 0) and (0, 1) steps, so that the
 * compiler vectorizes each; with (0, 0) steps a row is one value. */
#define ROWS(TI, TO, XI, YI, EXPR)                                                \
    for (npy_intp r = 0; r < rows; r++) {                                         \
        const TI *qa = pa + r * ra, *qb = pb + r * rb;                            \
        TO *qo = po + r * n;                                                      \
        for (npy_intp i = 0; i < n; i++) {                                        \
            const TI x = qa[XI], y = qb[YI];                                      \
            qo[i] = (EXPR);                                                       \
        }                                                                         \
    }
#define LOOP_BODY(TI, TO, EXPR)                                                   \
    const TI *pa = (const TI *)a_;                                                \
    const TI *pb = (const TI *)b_;                                                \
    TO *po = (TO *)o_;                                                            \
    if (sa && sb) {                                                               \
        ROWS(TI, TO, i, i, EXPR)                                                  \
    } else if (sa) {                                                              \
        ROWS(TI, TO, i, 0, EXPR)                                                  \
    } else if (sb) {                                                              \
        ROWS(TI, TO, 0, i, EXPR)                                                  \
    } else {                                                                      \
        for (npy_intp r = 0; r < rows; r++) {                                     \
            const TI x = pa[r * ra], y = pb[r * rb];                              \
            const TO v = (EXPR);                                                  \
            for (npy_intp i = 0; i < n; i++) {                                    \
                po[r * n + i] = v;                                                \
            }                                                                     \
        }                                                                         \
    }

/* Each loop is compiled for AVX2 and the baseline, and the loader picks the widest
 * the CPU has (GCC's and Clang's function multiversioning, on x86-64 glibc). */
#if defined(__x86_64__) && defined(__GLIBC__) && defined(__has_attribute)
#if __has_attribute(target_clones)
#define WIDE __attribute__((target_clones("avx2", "default")))
#endif
#endif
#ifndef WIDE
#define WIDE
#endif

#define DEFINE_LOOP(NAME, TI, TO, EXPR)                                               \
    WIDE static void NAME(const char *a_, const char *b_, char *o_, npy_intp n, npy_intp sa, \
                          npy_intp sb, npy_intp rows, npy_intp ra, npy_intp rb)       \
    {                                                                                 \
        LOOP_BODY(TI, TO, EXPR)                                                       \
    }

/* Integers wrap: the arithmetic is done unsigned (at least 32 bits wide, so that no
 * promotion to int can overflow) and converted back, as NumPy's loops behave. */
#define INT_LOOPS(SUFFIX, T, U)                                                       \
    DEFINE_LOOP(add_##SUFFIX, T, T, (T)((U)x + (U)y))                                 \
    DEFINE_LOOP(subtract_##SUFFIX, T, T, (T)((U)x - (U)y))                            \
    DEFINE_LOOP(multiply_##SUFFIX, T, T, (T)((U)x * (U)y))                            \
    DEFINE_LOOP(bitwise_and_##SUFFIX, T, T, (T)(x & y))                               \
    DEFINE_LOOP(bitwise_or_##SUFFIX, T, T, (T)(x | y))                                \
    DEFINE_LOOP(bitwise_xor_##SUFFIX, T, T, (T)(x ^ y))                               \
    COMPARE_LOOPS(SUFFIX, T)

#define FLOAT_LOOPS(SUFFIX, T)                                                        \
    DEFINE_LOOP(add_##SUFFIX, T, T, x + y)                                            \
    DEFINE_LOOP(subtract_##SUFFIX, T, T, x - y)                                       \
    DEFINE_LOOP(multiply_##SUFFIX, T, T, x * y)                                       \
    DEFINE_LOOP(divide_##SUFFIX, T, T, x / y)                                         \
    COMPARE_LOOPS(SUFFIX, T)

#define COMPARE_LOOPS(SUFFIX, T)                                                      \
    DEFINE_LOOP(equal_##SUFFIX, T, npy_bool, x == y)                                  \
    DEFINE_LOOP(not_equal_##SUFFIX, T, npy_bool, x != y)                              \
    DEFINE_LOOP(greater_##SUFFIX, T, npy_bool, x > y)                                 \
    DEFINE_LOOP(greater_equal_##SUFFIX, T, npy_bool, x >= y)                          \
    DEFINE_LOOP(less_##SUFFIX, T, npy_bool, x < y)                                    \
    DEFINE_LOOP(less_equal_##SUFFIX, T, npy_bool, x <= y)

INT_LOOPS(byte, npy_byte, npy_uint32)
INT_LOOPS(ubyte, npy_ubyte, npy_uint32)
INT_LOOPS(short, npy_short, npy_uint32)
INT_LOOPS(ushort, npy_ushort, npy_uint32)
INT_LOOPS(int, npy_int, npy_uint32)
INT_LOOPS(uint, npy_uint, npy_uint32)
INT_LOOPS(long, npy_long, npy_ulong)
INT_LOOPS(ulong, npy_ulong, npy_ulong)
INT_LOOPS(longlong, npy_longlong, npy_ulonglong)
INT_LOOPS(ulonglong, npy_ulonglong, npy_ulonglong)
FLOAT_LOOPS(float, npy_float)
FLOAT_LOOPS(double, npy_double)

/* A bool byte other than 0 and 1 (a view of uint8 memory) reads as true, as in NumPy. */
DEFINE_LOOP(equal_bool, npy_bool, npy_bool, (x != 0) == (y != 0))
DEFINE_LOOP(not_equal_bool, npy_bool, npy_bool, (x != 0) != (y != 0))
DEFINE_LOOP(logical_and_bool, npy_bool, npy_bool, (x != 0) && (y != 0))
DEFINE_LOOP(logical_or_bool, npy_bool, npy_bool, (x != 0) || (y != 0))
DEFINE_LOOP(logical_xor_bool, npy_bool, npy_bool, (x != 0) != (y != 0))

typedef struct {
    const char *name;
    int bool_result;
    loop_fn loops[N_TYPES]; /* by NumPy type number; NULL: no loop here */
} ufunc_loops;

#define INTS(OP)                                                                     \
    [NPY_BYTE] = OP##_byte, [NPY_UBYTE] = OP##_ubyte, [NPY_SHORT] = OP##_short, \
    [NPY_USHORT] = OP##_ushort, [NPY_INT] = OP##_int, [NPY_UINT] = OP##_uint, \
    [NPY_LONG] = OP##_long, [NPY_ULONG] = OP##_ulong, [NPY_LONGLONG] = OP##_longlong, \
    [NPY_ULONGLONG] = OP##_ulonglong
#define FLOATS(OP) [NPY_FLOAT] = OP##_float, [NPY_DOUBLE] = OP##_double

static const ufunc_loops LOOPS[] = {
    {"add", 0, {INTS(add), FLOATS(add)}},
    {"subtract", 0, {INTS(subtract), FLOATS(subtract)}},
    {"multiply", 0, {INTS(multiply), FLOATS(multiply)}},
    {"divide", 0, {FLOATS(divide)}},
    {"bitwise_and", 0, {INTS(bitwise_and)}},
    {"bitwise_or", 0, {INTS(bitwise_or)}},
    {"bitwise_xor", 0, {INTS(bitwise_xor)}},
    {"equal", 1, {[NPY_BOOL] = equal_bool, INTS(equal), FLOATS(equal)}},
    {"not_equal", 1, {[NPY_BOOL] = not_equal_bool, INTS(not_equal), FLOATS(not_equal)}},
    {"greater", 1, {INTS(greater), FLOATS(greater)}},
    {"greater_equal", 1, {INTS(greater_equal), FLOATS(greater_equal)}},
    {"less", 1, {INTS(less), FLOATS(less)}},
    {"less_equal", 1, {INTS(less_equal), FLOATS(less_equal)}},
    {"logical_and", 1, {[NPY_BOOL] = logical_and_bool}},
    {"logical_or", 1, {[NPY_BOOL] = logical_or_bool}},
    {"logical_xor", 1, {[NPY_BOOL] = logical_xor_bool}},
};

/* -- the callable -------------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    const ufunc_loops *ufunc;
    loop_fn loops[N_TYPES]; /* the ufunc's loops for the allowed dtypes only */
    npy_intp limit;         /* the most result elements */
} TinyBinary;

/* An operand the loops can read: an exact, C-contiguous, aligned, native ndarray. */
static int
plain(PyObject *x)
{
    return PyArray_CheckExact(x) &&
           PyArray_CHKFLAGS((PyArrayObject *)x, NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED) &&
           PyArray_ISNOTSWAPPED((PyArrayObject *)x);
}

/* The byte range an array's elements occupy (C-contiguous: one run). */
static int
overlaps(PyArrayObject *x, PyArrayObject *y)
{
    const char *x0 = PyArray_BYTES(x), *y0 = PyArray_BYTES(y);
    const char *x1 = x0 + PyArray_NBYTES(x), *y1 = y0 + PyArray_NBYTES(y);
    return PyArray_NBYTES(x) > 0 && PyArray_NBYTES(y) > 0 && x0 < y1 && y0 < x1;
}

/* The bytes of a vector of the widest loops (AVX2): a store that straddles two cache
 * lines costs about two, and NumPy allocates on 16-byte boundaries. */
#define VECTOR_BYTES 32
/* The largest row `walk` copies to rotate it, and the least output it shifts (below, the
 * split stores cost less than the two more calls). */
#define ROTATED_BYTES 2048
#define SHIFTED_BYTES 4096

/* One block of ``rows`` rows for the loop, as `loop_fn` takes it. Where one operand is
 * a row repeated (a bias: steps 1 within, 0 between rows), the other is laid out as o,
 * and o's rows all start h elements short of a vector boundary, the loop walks the block
 * shifted by h: each row it writes is the end of one of o's rows and the start of the
 * next, so that its vector stores are whole, and it reads the repeated row rotated by h
 * (a copy). Otherwise one call. */
static void
walk(loop_fn loop, const char *a, const char *b, char *o, npy_intp n, npy_intp sa,
     npy_intp sb, npy_intp rows, npy_intp ra, npy_intp rb, npy_intp ia, npy_intp io)
{
    int a_repeats = sa == 1 && ra == 0 && sb == 1 && rb == n;
    int b_repeats = sb == 1 && rb == 0 && sa == 1 && ra == n;
    /* the bytes short of a vector boundary (0: aligned), checked before anything divides */
    size_t short_by = (size_t)(-(uintptr_t)o % VECTOR_BYTES);
    if (!(a_repeats || b_repeats) || short_by == 0 || rows * n * io < SHIFTED_BYTES ||
        short_by % (size_t)io != 0 || (n * io) % VECTOR_BYTES != 0 || n * ia > ROTATED_BYTES) {
        loop(a, b, o, n, sa, sb, rows, ra, rb);
        return;
    }
    npy_intp h = (npy_intp)short_by / io; /* < n: a row holds a whole vector */
    char rotated[ROTATED_BYTES];
    const char *row = a_repeats ? a : b;
    memcpy(rotated, row + h * ia, (n - h) * ia);
    memcpy(rotated + (n - h) * ia, row, h * ia);
    loop(a, b, o, h, sa, sb, 1, 0, 0); /* the first h elements of the first row */
    for (int part = 0; part < 2; part++) {
        /* rows - 1 shifted rows, then the last n - h elements of the last row */
        npy_intp at = h + part * (rows - 1) * n;
        loop(a_repeats ? rotated : a + at * ia, b_repeats ? rotated : b + at * ia, o + at * io,
             part ? n - h : n, sa, sb, part ? 1 : rows - 1, ra, rb);
    }
}

static PyObject *
tiny_call(PyObject *self_, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    TinyBinary *self = (TinyBinary *)self_;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (kwnames != NULL || nargs < 2 || nargs > 3) {
        PyErr_SetString(PyExc_TypeError, "takes (a, b) or (a, b, out), positionally");
        return NULL;
    }
    PyObject *ao = args[0], *bo = args[1], *oo = nargs == 3 ? args[2] : Py_None;
    if (!plain(ao) || !plain(bo)) {
        Py_RETURN_NONE;
    }
    PyArrayObject *a = (PyArrayObject *)ao, *b = (PyArrayObject *)bo;
    int type = PyArray_TYPE(a);
    if (type != PyArray_TYPE(b) || type < 0 || type >= N_TYPES || self->loops[type] == NULL) {
        Py_RETURN_NONE;
    }
    loop_fn loop = self->loops[type];

    /* The result's shape, and each operand's element step per axis (0 where broadcast). */
    int nda = PyArray_NDIM(a), ndb = PyArray_NDIM(b);
    int nd = nda > ndb ? nda : ndb;
    npy_intp dims[NPY_MAXDIMS], stepa[NPY_MAXDIMS], stepb[NPY_MAXDIMS];
    npy_intp size = 1, span = 1, runa = 1, runb = 1; /* span: the product of dims not 0 */
    for (int k = nd - 1; k >= 0; k--) {
        int ka = k - (nd - nda), kb = k - (nd - ndb);
        npy_intp da = ka >= 0 ? PyArray_DIM(a, ka) : 1;
        npy_intp db = kb >= 0 ? PyArray_DIM(b, kb) : 1;
        npy_intp d;
        if (da == db || db == 1) {
            d = da;
        }
        else if (da == 1) {
            d = db;
        }
        else {
            Py_RETURN_NONE; /* no broadcast: the full path explains */
        }
        stepa[k] = da == 1 ? 0 : runa;
        stepb[k] = db == 1 ? 0 : runb;
        runa *= da;
        runb *= db;
        dims[k] = d;
        size *= d;
        span *= d > 0 ? d : 1; /* bounds runa and runb too: none of them overflows */
        if (span > self->limit) {
            Py_RETURN_NONE; /* a zero-size result of huge other dims included */
        }
    }
    int result_type = self->ufunc->bool_result ? NPY_BOOL : type;

    PyArrayObject *out;
    if (oo == Py_None) {
        out = (PyArrayObject *)PyArray_SimpleNew(nd, dims, result_type);
        if (out == NULL) {
            return NULL;
        }
    }
    else {
        if (!plain(oo)) {
            Py_RETURN_NONE;
        }
        out = (PyArrayObject *)oo;
        if (PyArray_TYPE(out) != result_type || PyArray_NDIM(out) != nd ||
            !PyArray_ISWRITEABLE(out)) {
            Py_RETURN_NONE;
        }
        for (int k = 0; k < nd; k++) {
            if (PyArray_DIM(out, k) != dims[k]) {
                Py_RETURN_NONE;
            }
        }
        /* An operand laid out as out itself is read before its element is written; any
         * other overlap is left to NumPy, which copies. */
        if ((overlaps(out, a) && (PyArray_BYTES(a) != PyArray_BYTES(out) || size != runa)) ||
            (overlaps(out, b) && (PyArray_BYTES(b) != PyArray_BYTES(out) || size != runb))) {
            Py_RETURN_NONE;
        }
        Py_INCREF(out);
    }
    if (size == 0) {
        return (PyObject *)out;
    }

    /* The last two axes are the loop's; the others are counted like an odometer. */
    const char *pa = PyArray_BYTES(a), *pb = PyArray_BYTES(b);
    char *po = PyArray_BYTES(out);
    npy_intp ia = PyArray_ITEMSIZE(a), io = PyArray_ITEMSIZE(out);
    npy_intp inner = nd > 0 ? dims[nd - 1] : 1, rows = nd > 1 ? dims[nd - 2] : 1;
    npy_intp sa = nd > 0 ? stepa[nd - 1] : 0, sb = nd > 0 ? stepb[nd - 1] : 0;
    npy_intp ra = nd > 1 ? stepa[nd - 2] : 0, rb = nd > 1 ? stepb[nd - 2] : 0;
    npy_intp index[NPY_MAXDIMS] = {0};
    npy_intp offa = 0, offb = 0;
    for (npy_intp done = 0; done < size; done += inner * rows) {
        walk(loop, pa + offa * ia, pb + offb * ia, po + done * io, inner, sa, sb, rows, ra, rb, ia,
             io);
        for (int k = nd - 3; k >= 0; k--) {
            offa += stepa[k];
            offb += stepb[k];
            if (++index[k] < dims[k]) {
                break;
            }
            offa -= stepa[k] * dims[k];
            offb -= stepb[k] * dims[k];
            index[k] = 0;
        }
    }
    return (PyObject *)out;
}

static void
tiny_dealloc(PyObject *self)
{
    Py_TYPE(self)->tp_free(self);
}

static PyObject *
tiny_repr(PyObject *self)
{
    return PyUnicode_FromFormat("<bcast tiny %s>", ((TinyBinary *)self)->ufunc->name);
}

static PyTypeObject TinyBinaryType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "bcast.ops._tinyc.TinyBinary",
    .tp_basicsize = sizeof(TinyBinary),
    .tp_dealloc = tiny_dealloc,
    .tp_repr = tiny_repr,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(TinyBinary, vectorcall),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "f(a, b) or f(a, b, out): the result, or None where the Python path decides.",
};

static PyObject *
binary(PyObject *module, PyObject *args)
{
    const char *name;
    PyObject *types;
    Py_ssize_t limit;
    if (!PyArg_ParseTuple(args, "sOn", &name, &types, &limit)) {
        return NULL;
    }
    const ufunc_loops *found = NULL;
    for (size_t k = 0; k < sizeof(LOOPS) / sizeof(LOOPS[0]); k++) {
        if (strcmp(LOOPS[k].name, name) == 0) {
            found = &LOOPS[k];
        }
    }
    if (found == NULL) {
        Py_RETURN_NONE; /* no loops for this ufunc */
    }
    TinyBinary *self = PyObject_New(TinyBinary, &TinyBinaryType);
    if (self == NULL) {
        return NULL;
    }
    self->vectorcall = tiny_call;
    self->ufunc = found;
    self->limit = limit;
    memset(self->loops, 0, sizeof(self->loops));
    PyObject *seq = PySequence_Fast(types, "type_numbers must be a sequence of int");
    if (seq == NULL) {
        Py_DECREF(self);
        return NULL;
    }
    for (Py_ssize_t k = 0; k < PySequence_Fast_GET_SIZE(seq); k++) {
        long t = PyLong_AsLong(PySequence_Fast_GET_ITEM(seq, k));
        if (t == -1 && PyErr_Occurred()) {
            Py_DECREF(seq);
            Py_DECREF(self);
            return NULL;
        }
        if (t >= 0 && t < N_TYPES) {
            self->loops[t] = found->loops[t];
        }
    }
    Py_DECREF(seq);
    return (PyObject *)self;
}

static PyObject *
covered(PyObject *module, PyObject *arg)
{
    if (!PyUnicode_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "a ufunc name");
        return NULL;
    }
    PyObject *result = PyList_New(0);
    if (result == NULL) {
        return NULL;
    }
    for (size_t k = 0; k < sizeof(LOOPS) / sizeof(LOOPS[0]); k++) {
        if (PyUnicode_CompareWithASCIIString(arg, LOOPS[k].name) != 0) {
            continue;
        }
        for (int t = 0; t < N_TYPES; t++) {
            if (LOOPS[k].loops[t] == NULL) {
                continue;
            }
            PyObject *number = PyLong_FromLong(t);
            if (number == NULL || PyList_Append(result, number) < 0) {
                Py_XDECREF(number);
                Py_DECREF(result);
                return NULL;
            }
            Py_DECREF(number);
        }
    }
    return result;
}

static PyMethodDef methods[] = {
    {"binary", binary, METH_VARARGS,
     "binary(name, type_numbers, limit): the tiny callable of a NumPy ufunc, or None."},
    {"covered", covered, METH_O,
     "covered(name): the NumPy type numbers this module has a loop of the ufunc for."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_tinyc",
    "The compiled tiny path of bcast's binary operators.", -1, methods,
};

PyMODINIT_FUNC
PyInit__tinyc(void)
{
    import_array();
    if (PyType_Ready(&TinyBinaryType) < 0) {
        return NULL;
    }
    return PyModule_Create(&module_def);
}
