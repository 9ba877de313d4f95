/* The state-space intervals' Kalman filter (grpofit/fitting/statespace_ci.py), compiled.

   numpy runs the filter as about a dozen array operations per point, each over every grid cell;
   with at most 32 points and a few hundred cells the arrays are small, so the cost was the
   operations' own overhead. This module runs the same computation as one loop: the covariance
   recursion, the mean pass over the columns [y, 1, mode columns], the standardised innovations
   and the log determinant. It performs the same floating-point operations in the same order as
   the numpy code it stands for (statespace_ci._innovations_numpy), so its results are the same
   bits wherever numpy's exp and log are the C library's (the reference numerics the tests pin,
   grpofit/testing/numerics.py): it is built with -ffp-contract=off (no fused multiply-add) and
   without fast-math (setup.py). Only the Python C API is used (buffers), not numpy's: nothing
   but a C compiler is needed to build it. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

/* the buffer of one argument: C-contiguous, ``items`` 8-byte items of the kind ``integer``
   (int64) or not (double); a float64 array given for an int64 one has the same size, so the
   format is checked too (its last character: numpy may prefix a byte order) */
static int get(PyObject *obj, Py_buffer *view, int writable, int integer, Py_ssize_t items, const char *name) {
    if (PyObject_GetBuffer(obj, view, (writable ? PyBUF_WRITABLE : 0) | PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
        return -1;
    const char *f = view->format ? view->format : "B";
    const char kind = f[0] ? f[strlen(f) - 1] : 'B';
    const int kind_ok = integer ? (kind == 'q' || kind == 'l') : kind == 'd';
    if (!kind_ok || view->itemsize != 8 || view->len != items * 8) {
        PyErr_Format(PyExc_ValueError, "%s: expected %zd items of %s", name, items, integer ? "int64" : "float64");
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

/* numpy's maximum: the first argument when it is not smaller or is NaN, else the second */
static inline double np_max(double a, double b) { return (a >= b || a != a) ? a : b; }

static PyObject *innovations(PyObject *self, PyObject *args) {
    PyObject *o[10];
    Py_ssize_t n, m, K, S, modes;
    if (!PyArg_ParseTuple(args, "nnnnnOOOOOOOOOO", &n, &m, &K, &S, &modes, &o[0], &o[1], &o[2], &o[3], &o[4],
                          &o[5], &o[6], &o[7], &o[8], &o[9]))
        return NULL;
    if (n < 1 || K < 1 || S < 0 || modes < 1 || modes > 2 || m != 2 + modes) {
        PyErr_SetString(PyExc_ValueError, "innovations: bad sizes");
        return NULL;
    }
    /* step_of (n-1) int64; FQ (7,S,K); y (n); cols (K,n,2); wb (n); count (n); width (K) = ts - ti;
       r (K); outputs Z (n,m,K), logdet (K) */
    Py_buffer v[10];
    const Py_ssize_t items[10] = {n - 1, 7 * S * K, n, K * n * 2, n, n, K, K, n * m * K, K};
    const char *names[10] = {"step_of", "FQ", "y", "cols", "wb", "count", "width", "r", "Z", "logdet"};
    int got = 0;
    for (; got < 10; got++)
        if (get(o[got], &v[got], got >= 8, got == 0, items[got], names[got]) < 0)
            break;
    if (got < 10) {
        for (int i = 0; i < got; i++)
            PyBuffer_Release(&v[i]);
        return NULL;
    }
    const int64_t *step_of = (const int64_t *)v[0].buf;
    const double *FQ = (const double *)v[1].buf, *y = (const double *)v[2].buf, *cols = (const double *)v[3].buf;
    const double *wb = (const double *)v[4].buf, *count = (const double *)v[5].buf, *width = (const double *)v[6].buf;
    const double *r = (const double *)v[7].buf;
    double *Z = (double *)v[8].buf, *logdet = (double *)v[9].buf;
    int bad = 0;
    for (Py_ssize_t j = 0; j + 1 < n; j++)
        if (step_of[j] < 0 || step_of[j] >= S)
            bad = 1;
    if (bad) {
        for (int i = 0; i < 10; i++)
            PyBuffer_Release(&v[i]);
        PyErr_SetString(PyExc_ValueError, "step_of out of range");
        return NULL;
    }
    const double *f11 = FQ, *f12 = FQ + S * K, *f21 = FQ + 2 * S * K, *f22 = FQ + 3 * S * K;
    const double *q11 = FQ + 4 * S * K, *q12 = FQ + 5 * S * K, *q22 = FQ + 6 * S * K;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t k = 0; k < K; k++) {
        double p0 = 0.0, p1 = 0.0, p2 = 0.0; /* P = (p11, p12, p22) */
        double X0[4] = {0.0, 0.0, 0.0, 0.0}, X1[4] = {0.0, 0.0, 0.0, 0.0}; /* the mean (e, e') per column */
        const double r2 = r[k] * r[k];
        double ld = 0.0;
        for (Py_ssize_t j = 0; j < n; j++) {
            if (j) {
                const Py_ssize_t i = (Py_ssize_t)step_of[j - 1] * K + k;
                const double a11 = f11[i], a12 = f12[i], a21 = f21[i], a22 = f22[i];
                /* P <- C P + Q, C's entries as numpy forms them, each row's terms summed in order */
                const double c00 = a11 * a11, c01 = (2.0 * a11) * a12, c02 = a12 * a12;
                const double c10 = a11 * a21, c11 = a11 * a22 + a12 * a21, c12 = a12 * a22;
                const double c20 = a21 * a21, c21 = (2.0 * a21) * a22, c22 = a22 * a22;
                const double n0 = ((0.0 + c00 * p0) + c01 * p1) + c02 * p2; /* add.reduce starts at 0 */
                const double n1 = ((0.0 + c10 * p0) + c11 * p1) + c12 * p2;
                const double n2 = ((0.0 + c20 * p0) + c21 * p1) + c22 * p2;
                p0 = n0 + q11[i];
                p1 = n1 + q12[i];
                p2 = n2 + q22[i];
                for (Py_ssize_t c = 0; c < m; c++) { /* X <- F X */
                    const double e = X0[c], de = X1[c];
                    X0[c] = (0.0 + a11 * e) + a12 * de;
                    X1[c] = (0.0 + a21 * e) + a22 * de;
                }
            }
            /* a bin's observation variance: the point's, less what averaging over its width
               removes from the forcing (phi, as statespace_ci._innovations_numpy) */
            const double xw = wb[j] / width[k];
            const double phi = xw > 1e-6 ? 2.0 * ((xw - 1.0) + exp(-xw)) / np_max(xw * xw, 1e-300) : 1.0;
            const double obs = np_max(1.0 / count[j] - r2 * (1.0 - phi), 0.05 / count[j]);
            const double sv = p0 + obs;
            const double g0 = p0 / sv, g1 = p1 / sv;
            const double u = g1 * p1; /* p22 -= g1 p12 (p12 before its own update) */
            const double r0 = g0 * p0, r1 = g0 * p1;
            p0 = p0 - r0;
            p1 = p1 - r1;
            p2 = p2 - u;
            const double scale = 1.0 / sqrt(sv);
            ld = ld + log(sv);
            double *z = Z + j * m * K + k;
            for (Py_ssize_t c = 0; c < m; c++) {
                /* the columns [y, 1, mode columns] */
                const double b = c == 0 ? y[j] : c == 1 ? 1.0 : cols[(k * n + j) * 2 + (c - 2)];
                const double innov = b - X0[c];
                z[c * K] = innov * scale;
                X0[c] = X0[c] + g0 * innov;
                X1[c] = X1[c] + g1 * innov;
            }
        }
        logdet[k] = ld;
    }
    Py_END_ALLOW_THREADS
    for (int i = 0; i < 10; i++)
        PyBuffer_Release(&v[i]);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"innovations", innovations, METH_VARARGS,
     "innovations(n, m, K, S, modes, step_of, FQ, y, cols, wb, count, width, r, Z, logdet): the filter's standardised innovations into Z and log determinants into logdet"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_filter", NULL, -1, methods};

PyMODINIT_FUNC PyInit__filter(void) { return PyModule_Create(&module); }
