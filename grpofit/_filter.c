/* The state-space intervals' per-cell arithmetic (grpofit/fitting/statespace_ci.py), compiled.

   numpy ran each stage as a dozen or more array operations, each over every grid cell; with at
   most 32 points and a few hundred cells the arrays are small, so the cost was the operations'
   own overhead. Here each stage is one loop:
   - columns: the mean's mode column of every cell (statespace_ci._columns_numpy);
   - transitions: the forcing's F and Q over every spacing (statespace_ci._transitions_numpy);
   - innovations: the Kalman filter, the Gram matrix of its standardised innovations and its
     log determinant (statespace_ci._innovations_numpy and statespace_ci._gram);
   - levels: the levels' solve and both likelihoods (statespace_ci._levels_numpy);
   - mixture: the plateau's mixture quantiles (statespace_ci._mixture_newton).
   Each performs the floating-point operations of the numpy function it stands for, so its
   results equal numpy's to round-off (tests/test_filter_kernel.py compares them by tolerance).
   Only the Python C API is used (buffers), not numpy's: nothing but a C compiler is needed to
   build it. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

/* the buffer of one argument: C-contiguous, ``items`` 8-byte items of the kind ``integer``
   (int64) or not (double); a float64 array given for an int64 one has the same size, so the
   format is checked too (its last character: numpy may prefix a byte order) */
static int get(PyObject *obj, Py_buffer *view, int writable, int integer, Py_ssize_t items, const char *name) {
    if (items < 0 || items > PY_SSIZE_T_MAX / 8) {  /* a size product that overflowed (see mul) */
        PyErr_Format(PyExc_ValueError, "%s: sizes too large", name);
        return -1;
    }
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

/* ``a * b`` for sizes, or -1 when either is negative or the product (in bytes of 8-byte
   items) would overflow: a size argument must never wrap around into a small buffer size */
static Py_ssize_t mul(Py_ssize_t a, Py_ssize_t b) {
    if (a < 0 || b < 0)
        return -1;
    if (a != 0 && b > PY_SSIZE_T_MAX / 8 / a)
        return -1;
    return a * b;
}

/* release every buffer of ``v`` up to ``got`` */
static void release(Py_buffer *v, int got) {
    for (int i = 0; i < got; i++)
        PyBuffer_Release(&v[i]);
}

/* the buffers of ``count`` arguments, the first ``ints`` int64 and those from ``first_out`` on
   writable; on failure everything taken is released */
static int get_all(PyObject **o, Py_buffer *v, int count, int ints, int first_out, const Py_ssize_t *items,
                   const char **names) {
    for (int got = 0; got < count; got++)
        if (get(o[got], &v[got], got >= first_out, got < ints, items[got], names[got]) < 0) {
            release(v, got);
            return -1;
        }
    return 0;
}

/* numpy's maximum: the first argument when it is not smaller or is NaN, else the second */
static inline double np_max(double a, double b) { return (a >= b || a != a) ? a : b; }

/* One cell of the filter (statespace_ci._innovations_numpy, then statespace_ci._gram): its
   points' innovations, standardised, go straight into the Gram matrix of the columns
   [y, 1, mode columns], summed over the points in order as numpy's cumsum does (the first
   point's product, then each next one added); nothing per point is stored. ``M`` (3 or 4) is a
   constant where this is inlined, so the column loops unroll. ``ONE``: a one-mode cell (F and Q
   zero but for f11 and q11, everything finite, see one_mode): e' and the covariances p12, p22
   stay exactly +0 in the full recursion, so they are left out (the same bits). */
static inline __attribute__((always_inline)) void filter_cell(
    const int M, const int ONE, Py_ssize_t n, Py_ssize_t K, Py_ssize_t k, const int64_t *step_of, const double *FQ, Py_ssize_t S,
    const double *y, const double *cols, const double *phi, const double *inv_count, const double *floor_var,
    const double *r, double *G, double *logdet, double *sv_of) {
    const double *f11 = FQ, *f12 = FQ + S * K, *f21 = FQ + 2 * S * K, *f22 = FQ + 3 * S * K;
    const double *q11 = FQ + 4 * S * K, *q12 = FQ + 5 * S * K, *q22 = FQ + 6 * S * K;
    double p0 = 0.0, p1 = 0.0, p2 = 0.0; /* P = (p11, p12, p22) */
    double X0[4] = {0.0, 0.0, 0.0, 0.0}, X1[4] = {0.0, 0.0, 0.0, 0.0}; /* the mean (e, e') per column */
    double acc[4][4];
    const double r2 = r[k] * r[k];
    const double *col = cols + k * n * 2;
    double prod = 1.0;
    for (Py_ssize_t j = 0; j < n; j++) {
        if (j && ONE) { /* the full recursion's terms with f12 = f21 = f22 = 0 and p12 = p22 = e' = +0 */
            const Py_ssize_t i = (Py_ssize_t)step_of[j - 1] * K + k;
            const double a11 = f11[i];
            p0 = (0.0 + (a11 * a11) * p0) + q11[i];
#pragma GCC unroll 4
            for (int c = 0; c < M; c++)
                X0[c] = 0.0 + a11 * X0[c];
        } else if (j) {
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
#pragma GCC unroll 4
            for (int c = 0; c < M; c++) { /* X <- F X */
                const double e = X0[c], de = X1[c];
                X0[c] = (0.0 + a11 * e) + a12 * de;
                X1[c] = (0.0 + a21 * e) + a22 * de;
            }
        }
        const double obs = np_max(inv_count[j] - r2 * (1.0 - phi[j]), floor_var[j]);
        const double sv = p0 + obs;
        const double g0 = p0 / sv, g1 = p1 / sv;
        const double u = g1 * p1; /* p22 -= g1 p12 (p12 before its own update) */
        const double r0 = g0 * p0, r1 = g0 * p1;
        p0 = p0 - r0;
        if (!ONE) {
            p1 = p1 - r1;
            p2 = p2 - u;
        }
        const double scale = 1.0 / sqrt(sv);
        prod = j ? prod * sv : sv; /* the log determinant as the log of the product (cumprod order) */
        sv_of[j] = sv;
        double z[4];
#pragma GCC unroll 4
        for (int c = 0; c < M; c++) {
            const double b = c == 0 ? y[j] : c == 1 ? 1.0 : col[j * 2 + (c - 2)];
            const double innov = b - X0[c];
            z[c] = innov * scale;
            X0[c] = X0[c] + g0 * innov;
            if (!ONE)
                X1[c] = X1[c] + g1 * innov;
        }
#pragma GCC unroll 4
        for (int a = 0; a < M; a++)
#pragma GCC unroll 4
            for (int b = 0; b <= a; b++)
                acc[a][b] = j ? acc[a][b] + z[a] * z[b] : z[a] * z[b];
    }
    for (int a = 0; a < M; a++)
        for (int b = 0; b <= a; b++)
            G[(a * M + b) * K + k] = G[(b * M + a) * K + k] = acc[a][b];
    if (prod > 0.0 && prod < INFINITY) {
        logdet[k] = log(prod);
    } else { /* out of range (statespace_ci._log_product): the sum of the logs, in order */
        double ld = log(sv_of[0]);
        for (Py_ssize_t j = 1; j < n; j++)
            ld = ld + log(sv_of[j]);
        logdet[k] = ld;
    }
}

/* Is cell k one-mode, so that filter_cell may leave e' out? Its F and Q zero but for f11 >= 0
   and q11 at every spacing, and every input finite (the data too: the caller checks y); then
   e', p12 and p22 are exactly +0 throughout the full recursion. */
static int one_mode(Py_ssize_t n, Py_ssize_t K, Py_ssize_t k, Py_ssize_t S, const double *FQ, const double *cols,
                    const double *phi, const double *r) {
    const Py_ssize_t SK = S * K;
    if (!isfinite(r[k]))
        return 0;
    for (Py_ssize_t s = 0; s < S; s++) {
        const Py_ssize_t i = s * K + k;
        if (!(FQ[i] >= 0.0 && isfinite(FQ[i]) && isfinite(FQ[4 * SK + i])) || FQ[SK + i] != 0.0 ||
            FQ[2 * SK + i] != 0.0 || FQ[3 * SK + i] != 0.0 || FQ[5 * SK + i] != 0.0 || FQ[6 * SK + i] != 0.0)
            return 0;
    }
    for (Py_ssize_t j = 0; j < 2 * n; j++)
        if (!isfinite(cols[k * n * 2 + j]))
            return 0;
    for (Py_ssize_t j = 0; j < n; j++)
        if (!isfinite(phi[j]))
            return 0;
    return 1;
}

/* The Kalman filter of every cell (statespace_ci._innovations_numpy, statespace_ci._gram and
   statespace_ci._log_product, the same operations in the same order): the Gram matrix of its
   standardised innovations and its log determinant. */
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
       r (K); outputs G (m,m,K), logdet (K) */
    Py_buffer v[10];
    const Py_ssize_t items[10] = {n - 1, mul(mul(7, S), K), n, mul(mul(K, n), 2), n, n, K, K, mul(mul(m, m), K), K};
    const char *names[10] = {"step_of", "FQ", "y", "cols", "wb", "count", "width", "r", "G", "logdet"};
    if (get_all(o, v, 10, 1, 8, items, names) < 0)
        return NULL;
    const int64_t *step_of = (const int64_t *)v[0].buf;
    const double *FQ = (const double *)v[1].buf, *y = (const double *)v[2].buf, *cols = (const double *)v[3].buf;
    const double *wb = (const double *)v[4].buf, *count = (const double *)v[5].buf, *width = (const double *)v[6].buf;
    const double *r = (const double *)v[7].buf;
    double *G = (double *)v[8].buf, *logdet = (double *)v[9].buf;
    int bad = 0;
    for (Py_ssize_t j = 0; j + 1 < n; j++)
        if (step_of[j] < 0 || step_of[j] >= S)
            bad = 1;
    if (bad) {
        release(v, 10);
        PyErr_SetString(PyExc_ValueError, "step_of out of range");
        return NULL;
    }
    /* what depends on the point alone, once: 1 / count and the variance's floor 0.05 / count */
    double *per_point = PyMem_Malloc(4 * n * sizeof(double));
    if (per_point == NULL) {
        release(v, 10);
        return PyErr_NoMemory();
    }
    double *inv_count = per_point, *floor_var = per_point + n, *phi = per_point + 2 * n, *sv_of = per_point + 3 * n;
    for (Py_ssize_t j = 0; j < n; j++) {
        inv_count[j] = 1.0 / count[j];
        floor_var[j] = 0.05 / count[j];
    }
    int y_finite = 1;
    for (Py_ssize_t j = 0; j < n; j++)
        y_finite = y_finite && isfinite(y[j]);
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t k = 0; k < K; k++) {
        /* a bin's observation variance is the point's less what averaging over its width removes
           from the forcing: phi (as statespace_ci._innovations_numpy) depends on the cell's slow
           time alone, the same for the next cells of a grid (the forcing ratio innermost) */
        if (k == 0 || width[k] != width[k - 1])
            for (Py_ssize_t j = 0; j < n; j++) {
                phi[j] = 1.0; /* a point as logged (width 0: 0 / width is never above 1e-6) */
                if (wb[j] != 0.0) {
                    const double xw = wb[j] / width[k];
                    phi[j] = xw > 1e-6 ? 2.0 * ((xw - 1.0) + exp(-xw)) / np_max(xw * xw, 1e-300) : 1.0;
                }
            }
        const int one = y_finite && one_mode(n, K, k, S, FQ, cols, phi, r);
        if (m == 3 && one)
            filter_cell(3, 1, n, K, k, step_of, FQ, S, y, cols, phi, inv_count, floor_var, r, G, logdet, sv_of);
        else if (m == 3)
            filter_cell(3, 0, n, K, k, step_of, FQ, S, y, cols, phi, inv_count, floor_var, r, G, logdet, sv_of);
        else if (one)
            filter_cell(4, 1, n, K, k, step_of, FQ, S, y, cols, phi, inv_count, floor_var, r, G, logdet, sv_of);
        else
            filter_cell(4, 0, n, K, k, step_of, FQ, S, y, cols, phi, inv_count, floor_var, r, G, logdet, sv_of);
    }
    Py_END_ALLOW_THREADS
    PyMem_Free(per_point);
    release(v, 10);
    Py_RETURN_NONE;
}

/* The levels' solve of every cell (statespace_ci._levels_numpy, the same operations in the
   same order): from the Gram matrix of its standardised columns (the filter's, ``innovations``),
   its Cholesky factor (2 x 2 or 3 x 3), the plateau's mean and variance and both likelihoods. */
static PyObject *levels(PyObject *self, PyObject *args) {
    PyObject *o[8];
    Py_ssize_t m, K, n_obs;
    double noise_var;
    if (!PyArg_ParseTuple(args, "nnndOOOOOOOO", &m, &K, &n_obs, &noise_var, &o[0], &o[1], &o[2], &o[3], &o[4],
                          &o[5], &o[6], &o[7]))
        return NULL;
    if (K < 1 || m < 3 || m > 4) {
        PyErr_SetString(PyExc_ValueError, "levels: bad sizes");
        return NULL;
    }
    /* q (K) int64; G (m,m,K); logdet (K); outputs nll, mean, var, ml, resid (K) */
    Py_buffer v[8];
    const Py_ssize_t items[8] = {K, mul(mul(m, m), K), K, K, K, K, K, K};
    const char *names[8] = {"q", "G", "logdet", "nll", "mean", "var", "ml", "resid"};
    if (get_all(o, v, 8, 1, 3, items, names) < 0)
        return NULL;
    const int64_t *q = (const int64_t *)v[0].buf;
    const double *Gm = (const double *)v[1].buf, *logdet = (const double *)v[2].buf;
    double *nll = (double *)v[3].buf, *mean = (double *)v[4].buf, *var = (double *)v[5].buf, *ml = (double *)v[6].buf;
    double *resid = (double *)v[7].buf;
    const int known = noise_var >= 0.0;
    const double log_nv = known ? (double)n_obs * log(noise_var) : 0.0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t k = 0; k < K; k++) {
        const int three = q[k] == 2;
        if (q[k] < 1 || q[k] > 2 || (three && m < 4)) {
            nll[k] = ml[k] = resid[k] = INFINITY;
            mean[k] = var[k] = 0.0;
            continue;
        }
        double G[4][4];
        for (Py_ssize_t a = 0; a < m; a++)
            for (Py_ssize_t b = 0; b <= a; b++)
                G[a][b] = Gm[(a * m + b) * K + k];
        const double yy = G[0][0], c0 = G[1][0], c1 = G[2][0];
        const double a00 = G[1][1], a10 = G[2][1], a11 = G[2][2];
        double L00 = sqrt(a00);
        double L10 = a10 / L00;
        const double d1 = a11 - L10 * L10;
        double L11 = sqrt(d1);
        int ok = (a00 > 0) && (d1 > 0);
        double c2 = 0.0, L20 = 0.0, L21 = 0.0, d2 = 1.0;
        if (m > 3) {
            c2 = G[3][0];
            if (three) {
                L20 = G[3][1] / L00;
                L21 = (G[3][2] - L20 * L10) / L11;
                d2 = (G[3][3] - L20 * L20) - L21 * L21;
            }
            ok = ok && (d2 > 0);
        }
        double L22 = 1.0;
        if (ok) {
            L22 = sqrt(d2);
        } else {
            L00 = 1.0, L10 = 0.0, L11 = 1.0, L20 = 0.0, L21 = 0.0;
        }
        const double u0 = c0 / L00;
        const double u1 = (c1 - L10 * u0) / L11;
        const double u2 = three ? ((c2 - L20 * u0) - L21 * u1) / L22 : 0.0;
        const double b2 = u2 / L22;
        const double b1 = three ? (u1 - L21 * b2) / L11 : u1 / L11;
        const double b0 = three ? ((u0 - L10 * b1) - L20 * b2) / L00 : (u0 - L10 * b1) / L00;
        const double v0 = 1.0 / L00;
        const double v1 = -(L10 * v0) / L11;
        const double v2 = -((L20 * v0) + (L21 * v1)) / L22;
        const double inv00 = three ? (v0 * v0 + v1 * v1) + v2 * v2 : v0 * v0 + v1 * v1;
        double Qf = three ? ((yy - u0 * u0) - u1 * u1) - u2 * u2 : (yy - u0 * u0) - u1 * u1;
        Qf = np_max(Qf, 1e-300);
        const double logdet_a = 2.0 * (three ? (log(L00) + log(L11)) + log(L22) : log(L00) + log(L11));
        const double ld = logdet[k];
        double nl, mll, vr;
        if (known) {
            nl = 0.5 * ((ld + logdet_a) + Qf / noise_var);
            mll = 0.5 * ((ld + Qf / noise_var) + log_nv);
            vr = noise_var * inv00;
        } else {
            const double dof = (double)(n_obs - 1 - q[k]);
            nl = 0.5 * (ld + logdet_a) + (0.5 * dof) * log(Qf);
            mll = 0.5 * (ld + (double)n_obs * log(Qf / (double)n_obs));
            vr = Qf / dof * inv00;
        }
        const int bad = !(isfinite(nl) && ok);
        nll[k] = bad ? INFINITY : nl;
        ml[k] = bad ? INFINITY : mll;
        resid[k] = bad ? INFINITY : Qf;
        mean[k] = b0;
        var[k] = vr;
    }
    Py_END_ALLOW_THREADS
    release(v, 8);
    Py_RETURN_NONE;
}

/* the standard normal CDF as statespace_ci._ncdf computes it (erfc by its Chebyshev fit) */
static double ncdf(double x) {
    static const double poly[8] = {-0.82215223, 1.48851587, -1.13520398, 0.27886807, -0.18628806, 0.09678418,
                                   0.37409196, 1.00002368};
    const double z = fabs(x) / sqrt(2.0);
    const double t = 1.0 / (1.0 + 0.5 * z);
    double p = t * 0.17087277;
    for (int i = 0; i < 8; i++) {
        p = p + poly[i];
        p = p * t;
    }
    const double erfc = t * exp(((-z) * z - 1.26551223) + p);
    return x >= 0 ? 1.0 - 0.5 * erfc : 0.5 * erfc;
}

/* The two points of a normal mixture's CDF (statespace_ci._mixture_newton, the same operations
   in the same order): safeguarded Newton steps, bisection whenever a step leaves the bracket. */
static PyObject *mixture(PyObject *self, PyObject *args) {
    PyObject *o[3];
    double p[2], lo, hi, x[2], tol;
    if (!PyArg_ParseTuple(args, "OOOddddddd", &o[0], &o[1], &o[2], &p[0], &p[1], &lo, &hi, &x[0], &x[1], &tol))
        return NULL;
    Py_buffer v[3];
    Py_ssize_t K = PyObject_Length(o[0]);
    if (K < 1) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "mixture: no components");
        return NULL;
    }
    const Py_ssize_t items[3] = {K, K, K};
    const char *names[3] = {"w", "m", "s"};
    if (get_all(o, v, 3, 0, 3, items, names) < 0)
        return NULL;
    const double *w = (const double *)v[0].buf, *m = (const double *)v[1].buf, *s = (const double *)v[2].buf;
    const double root2pi = sqrt(2.0 * M_PI);
    double los[2] = {lo, lo}, his[2] = {hi, hi};
    Py_BEGIN_ALLOW_THREADS
    for (int it = 0; it < 30; it++) {
        double nw[2];
        int done = 1;
        for (int i = 0; i < 2; i++) {
            double F = 0.0, D = 0.0;
            for (Py_ssize_t k = 0; k < K; k++) {
                const double z = (x[i] - m[k]) / s[k];
                const double tf = w[k] * ncdf(z), td = w[k] * (exp((-0.5 * z) * z) / s[k]);
                F = k ? F + tf : tf;
                D = k ? D + td : td;
            }
            const double f = F - p[i], d = D / root2pi;
            if (f < 0)
                los[i] = x[i];
            if (f > 0)
                his[i] = x[i];
            const double step = d > 0 ? f / (1e-300 > d ? 1e-300 : d) : INFINITY;
            const double val = x[i] - step;
            nw[i] = (los[i] < val && val < his[i]) ? val : 0.5 * (los[i] + his[i]);
        }
        for (int i = 0; i < 2; i++) {
            if (!(fabs(nw[i] - x[i]) < tol))
                done = 0;
            x[i] = nw[i];
        }
        if (done)
            break;
    }
    Py_END_ALLOW_THREADS
    release(v, 3);
    return Py_BuildValue("(dd)", x[0], x[1]);
}

/* the roots of Ti l^2 + l + 1/Ts = 0 as statespace_ci._modes gives them: real a and b, or a +- i b */
static int modes(double ts, double ti, double *a, double *b) {
    double disc = 1.0 - (4.0 * ti) / ts;
    if (fabs(disc) < 1e-6)
        disc = disc >= 0 ? 1e-6 : -1e-6;
    const int under = disc < 0;
    const double root = sqrt(fabs(disc)), two = 2.0 * ti;
    *a = under ? -1.0 / two : 1.0 / (ts * ti * ((-1.0 - root) / two)); /* the slow root, without cancellation */
    *b = under ? root / two : (-1.0 - root) / two;
    return under;
}

/* The forcing's transitions F and Q of every cell over every spacing (statespace_ci._transitions_numpy,
   the same operations in the same order), into FQ (7, S, K). */
static PyObject *transitions(PyObject *self, PyObject *args) {
    PyObject *o[5];
    Py_ssize_t S, K;
    if (!PyArg_ParseTuple(args, "nnOOOOO", &S, &K, &o[0], &o[1], &o[2], &o[3], &o[4]))
        return NULL;
    if (S < 1 || K < 1) {
        PyErr_SetString(PyExc_ValueError, "transitions: bad sizes");
        return NULL;
    }
    Py_buffer v[5];
    const Py_ssize_t items[5] = {S, K, K, K, mul(mul(7, S), K)};
    const char *names[5] = {"dt", "ts", "ti", "r", "FQ"};
    if (get_all(o, v, 5, 0, 4, items, names) < 0)
        return NULL;
    const double *dt = (const double *)v[0].buf, *ts = (const double *)v[1].buf, *ti = (const double *)v[2].buf;
    const double *r = (const double *)v[3].buf;
    double *FQ = (double *)v[4].buf;
    const Py_ssize_t SK = S * K;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t k = 0; k < K; k++) {
        const double rr = r[k] * r[k];
        /* the grids list the forcing ratios innermost: a cell with the previous cell's times has
           its F (the exponentials) already; Q is the same arithmetic on it, times its own r^2 */
        const int same = k > 0 && ts[k] == ts[k - 1] && ti[k] == ti[k - 1];
        for (Py_ssize_t j = 0; same && j < S; j++) {
            double *e = FQ + j * K + k;
            const double g11 = e[-1], g12 = e[SK - 1], g21 = e[2 * SK - 1], g22 = e[3 * SK - 1];
            e[0] = g11;
            e[SK] = g12;
            e[2 * SK] = g21;
            e[3 * SK] = g22;
            if (ti[k] <= 0) {
                e[5 * SK] = e[6 * SK] = 0.0;
                e[4 * SK] = rr * (1.0 - g11 * g11);
                continue;
            }
            const double w2 = 1.0 / (ti[k] * ts[k]);
            e[4 * SK] = rr * ((1.0 - g11 * g11) - (w2 * g12) * g12);
            e[5 * SK] = rr * ((-g11 * g21) - (w2 * g12) * g22);
            e[6 * SK] = rr * ((w2 - g21 * g21) - (w2 * g22) * g22);
        }
        for (Py_ssize_t j = 0; !same && j < S; j++) {
            double *e = FQ + j * K + k;
            if (ti[k] <= 0) {
                const double f = exp(-dt[j] / ts[k]);
                e[0] = f;
                e[SK] = e[2 * SK] = e[3 * SK] = e[5 * SK] = e[6 * SK] = 0.0;
                e[4 * SK] = rr * (1.0 - f * f);
                continue;
            }
            double a, b;
            const int under = modes(ts[k], ti[k], &a, &b);
            const double ea = exp(a * dt[j]), eb = exp(b * dt[j]);
            double c0, c1;
            if (under) {
                const double sn = sin(b * dt[j]), cs = cos(b * dt[j]);
                c1 = (ea * sn) / b;
                c0 = ea * (cs - (a * sn) / b);
            } else {
                c1 = (ea - eb) / (a - b);
                c0 = (a * eb - b * ea) / (a - b);
            }
            const double w2 = 1.0 / (ti[k] * ts[k]);
            const double g11 = c0, g12 = c1, g21 = -w2 * c1, g22 = c0 - c1 / ti[k];
            e[0] = g11;
            e[SK] = g12;
            e[2 * SK] = g21;
            e[3 * SK] = g22;
            e[4 * SK] = rr * ((1.0 - g11 * g11) - (w2 * g12) * g12);
            e[5 * SK] = rr * ((-g11 * g21) - (w2 * g12) * g22);
            e[6 * SK] = rr * ((w2 - g21 * g21) - (w2 * g22) * g22);
        }
    }
    Py_END_ALLOW_THREADS
    release(v, 5);
    Py_RETURN_NONE;
}

/* exp(l t) averaged over a bin of c points spaced d whose first is t0 (statespace_ci._binned):
   ``em1`` is expm1(l d), the same for every point of the rate; expm1(c l d) is kept for the last
   count seen (equal-width bins share theirs). The same operations as numpy's, only not repeated. */
typedef struct {
    double l, d, em1, last_c, last_num;
} Binned;

static inline void binned_init(Binned *b, double l, double d) {
    b->l = l;
    b->d = d;
    b->em1 = expm1(l * d);
    b->last_c = NAN;
    b->last_num = 0.0;
}

static inline double binned(Binned *b, double t, double c) {
    const double t0 = t - (0.5 * (c - 1.0)) * b->d;
    double ratio = 1.0;
    if (c > 1) {
        if (c != b->last_c) {
            b->last_c = c;
            b->last_num = expm1(c * (b->l * b->d));
        }
        ratio = b->last_num / (c * b->em1);
    }
    return exp(b->l * t0) * ratio;
}

/* The mean's mode column of every cell (statespace_ci._columns_numpy, the same operations in
   the same order), into out (K, n). */
static PyObject *columns(PyObject *self, PyObject *args) {
    PyObject *o[5];
    Py_ssize_t n, K;
    double d;
    if (!PyArg_ParseTuple(args, "nnOOdOOO", &n, &K, &o[0], &o[1], &d, &o[2], &o[3], &o[4]))
        return NULL;
    if (n < 1 || K < 1) {
        PyErr_SetString(PyExc_ValueError, "columns: bad sizes");
        return NULL;
    }
    Py_buffer v[5];
    const Py_ssize_t items[5] = {n, n, K, K, mul(K, n)};
    const char *names[5] = {"t", "count", "ts", "ti", "out"};
    if (get_all(o, v, 5, 0, 4, items, names) < 0)
        return NULL;
    const double *t = (const double *)v[0].buf, *count = (const double *)v[1].buf, *ts = (const double *)v[2].buf;
    const double *ti = (const double *)v[3].buf;
    double *out = (double *)v[4].buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t k = 0; k < K; k++) {
        double *col = out + k * n;
        if (ti[k] <= 0) {
            Binned e;
            binned_init(&e, -1.0 / ts[k], d);
            for (Py_ssize_t j = 0; j < n; j++)
                col[j] = binned(&e, t[j], count[j]);
            continue;
        }
        double a, b;
        if (!modes(ts[k], ti[k], &a, &b)) {
            Binned ea, eb;
            binned_init(&ea, a, d);
            binned_init(&eb, b, d);
            for (Py_ssize_t j = 0; j < n; j++) {
                const double e1 = binned(&ea, t[j], count[j]), e2 = binned(&eb, t[j], count[j]);
                col[j] = (a * e2 - b * e1) / (a - b);
            }
            continue;
        }
        /* c expm1(x) / c and expm1(c x): the first the same for every point, the second for
           every point of the same count (numpy's _binned_complex, its terms not repeated) */
        const double xr = a * d, xi = b * d;
        double sh = sin(0.5 * xi);
        const double dr1 = expm1(xr) * cos(xi) - 2.0 * (sh * sh), di1 = exp(xr) * sin(xi);
        double last_c = NAN, num_r = 0.0, num_i = 0.0;
        for (Py_ssize_t j = 0; j < n; j++) {
            const double c = count[j];
            const double t0 = t[j] - (0.5 * (c - 1.0)) * d;
            double rr = 1.0, ri = 0.0;
            if (!(c <= 1)) {
                if (c != last_c) {
                    last_c = c;
                    const double nr = c * xr, ni = c * xi;
                    sh = sin(0.5 * ni);
                    num_r = expm1(nr) * cos(ni) - 2.0 * (sh * sh);
                    num_i = exp(nr) * sin(ni);
                }
                const double den_r = c * dr1, den_i = c * di1;
                const double mag = den_r * den_r + den_i * den_i;
                rr = (num_r * den_r + num_i * den_i) / mag;
                ri = (num_i * den_r - num_r * den_i) / mag;
            }
            const double ea = exp(a * t0);
            const double er = ea * cos(b * t0), ei = ea * sin(b * t0);
            const double Er = er * rr - ei * ri, Ei = er * ri + ei * rr;
            col[j] = Er - (a * Ei) / b;
        }
    }
    Py_END_ALLOW_THREADS
    release(v, 5);
    Py_RETURN_NONE;
}

/* ---------------------------------------------------------------------------------------------
   The least-squares fit's own arithmetic (grpofit/fitting/profile.py and grpofit/fitting/solve.py),
   compiled: each routine performs the operations of the numpy function it stands for, in the
   same order where it matters (sums over the bins in order), so both agree to round-off
   (tests/test_fit_kernel.py compares them by tolerance).
   - profile_grid: the damping ratio's profile grid (profile._evaluate_numpy: the relaxation
     shapes, then the levels' 2 x 2 least squares and the bounds);
   - oscillator_jacobian, oscillator_residuals: the oscillator's unit response and its
     derivatives in the timescale and the inertia at scalar times
     (grpofit.laws.oscillator.raw_relaxation_derivatives, the scalar path: the overdamped form,
     else the series or the closed form near and below critical), as the law's Jacobian or as
     the solve's weighted residuals and chained Jacobian (grpofit/fitting/jacobians.py);
   - rolling_median: the collapse and overshoot checks' centred rolling median
     (grpofit/fitting/collapse.py; order statistics, so the same values exactly). */

/* exp(max(x, -700)) (grpofit.laws.base.exp_neg) */
static inline double exp_floor(double x) { return exp(x >= -700.0 || x != x ? x : -700.0); }

/* profile_grid(R, M, nb, t, w, y, yy, sw, wy, zeta, ts, lo, hi, ssr, plat, init, g): for each row
   r (damping ratio zeta[r], inf: inertia 0) and timescale ts[r, j], the relaxation shape at the
   bins g[r, j, :] = g(t / ts; zeta), the levels' weighted least squares and its SSR (inf where
   singular or the levels leave [lo, hi]) */
static PyObject *profile_grid(PyObject *self, PyObject *args) {
    PyObject *o[9];
    Py_ssize_t R, M, nb;
    double yy, sw, wy, lo, hi;
    if (!PyArg_ParseTuple(args, "nnnOOOdddOOddOOOO", &R, &M, &nb, &o[0], &o[1], &o[2], &yy, &sw, &wy, &o[3], &o[4],
                          &lo, &hi, &o[5], &o[6], &o[7], &o[8]))
        return NULL;
    if (R < 0 || M < 0 || nb < 1) {
        PyErr_SetString(PyExc_ValueError, "profile_grid: bad sizes");
        return NULL;
    }
    Py_buffer v[9];
    const Py_ssize_t RM = mul(R, M);
    const Py_ssize_t items[9] = {nb, nb, nb, R, RM, RM, RM, RM, mul(RM, nb)};
    const char *names[9] = {"t", "w", "y", "zeta", "ts", "ssr", "plat", "init", "g"};
    if (get_all(o, v, 9, 0, 5, items, names) < 0)
        return NULL;
    const double *t = (const double *)v[0].buf, *w = (const double *)v[1].buf, *y = (const double *)v[2].buf;
    const double *zeta = (const double *)v[3].buf, *ts = (const double *)v[4].buf;
    double *ssr = (double *)v[5].buf, *plat = (double *)v[6].buf, *init = (double *)v[7].buf, *g = (double *)v[8].buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t r = 0; r < R; r++) {
        /* the row's coefficients (grpofit.laws.oscillator._shape_plan) */
        double z = zeta[r];
        if (fabs(z - 1.0) < 1e-7)
            z = z < 1.0 ? 1.0 - 1e-7 : 1.0 + 1e-7;
        const int kind = isinf(z) ? 2 : (z < 1.0 ? 0 : 1);
        double k0 = 0.0, k1 = 0.0, k2 = 0.0, k3 = 0.0;
        if (kind == 0) {
            const double a = (2.0 * z) * z, wd = (2.0 * z) * sqrt(1.0 - z * z);
            k0 = wd, k1 = a / wd, k2 = -a;
        } else if (kind == 1) {
            const double u = sqrt(1.0 - 1.0 / (z * z));
            const double t1 = 0.5 * (1.0 + u), t2 = 1.0 / (((2.0 * z) * z) * (1.0 + u));
            k0 = -1.0 / t1, k1 = t1 / u, k2 = -1.0 / t2, k3 = t2 / u;
        }
        for (Py_ssize_t j = 0; j < M; j++) {
            const Py_ssize_t c = r * M + j;
            double *gc = g + c * nb;
            const double T = ts[c];
            double s1 = 0.0, s2 = 0.0, y1 = 0.0;
            for (Py_ssize_t i = 0; i < nb; i++) {
                const double x = t[i] / T;
                double gi;
                if (kind == 2)
                    gi = exp_floor(-x);
                else if (kind == 0) {
                    const double wx = k0 * x;
                    gi = exp_floor(k2 * x) * (cos(wx) + sin(wx) * k1);
                } else
                    gi = exp_floor(x * k0) * k1 - exp_floor(x * k2) * k3;
                gc[i] = gi;
                const double gw = gi * w[i];
                s1 += gw;
                s2 += gw * gi;
                y1 += gw * y[i];
            }
            /* profile.linear_levels */
            const double det = sw * s2 - s1 * s1;
            const double alpha = (s2 * wy - s1 * y1) / det;
            const double beta = (sw * y1 - s1 * wy) / det;
            double q = (yy - alpha * wy) - beta * y1;
            const int bad = !(det > (1e-12 * sw) * np_max(s2, 1e-300)) || !isfinite(q);
            q = bad ? INFINITY : np_max(q, 0.0);
            const double p = alpha, p0 = alpha + beta;
            if (!(p >= lo && p <= hi && p0 >= lo && p0 <= hi))
                q = INFINITY;
            ssr[c] = q;
            plat[c] = p;
            init[c] = p0;
        }
    }
    Py_END_ALLOW_THREADS
    release(v, 9);
    Py_RETURN_NONE;
}

/* the oscillator's unit response g and its derivatives in the timescale and the inertia at one
   time (grpofit.laws.oscillator: _overdamped where disc >= u_switch2, else _near_critical with
   _nc_series where |z| < z_series and _nc_closed elsewhere), scalar parameters */
static inline void relaxation_at(double t, double ts, double ti, double disc, int over, double a, double beta,
                                 double z_series, const double *series, double *g_out, double *dts_out,
                                 double *dti_out) {
    if (over) {
        const double u = sqrt(disc);
        const double t1 = (0.5 * ts) * (1.0 + u), t2 = (2.0 * ti) / (1.0 + u), d = ts * u;
        const double x1 = t / t1;
        const double e1 = exp_floor(-x1);
        double x2 = t / np_max(t2, 1e-300);
        x2 = (x2 <= 700.0 || x2 != x2) ? x2 : 700.0; /* np.minimum(x2, -EXP_FLOOR) */
        const double e2 = exp(-x2);
        const double g = (t1 * e1 - t2 * e2) / d;
        const double fp1 = e1 * (1.0 + x1), fp2 = e2 * (1.0 + x2);
        const double dg1 = (fp1 - g) / d, dg2 = (g - fp2) / d;
        *g_out = g;
        *dts_out = (dg1 * (t1 - ti) + dg2 * (ti - t2)) / d;
        *dti_out = (dg2 - dg1) / u;
        return;
    }
    const double z = (beta * t) * t;
    double ec, es, esp;
    if (fabs(z) < z_series) { /* C, S, S' by their power series in z (series: 6 x 3, by rows) */
        double acc0 = 0.0, acc1 = 0.0, acc2 = 0.0, zk = 1.0;
        for (int k = 0; k < 6; k++) {
            zk = k == 0 ? 1.0 : (k == 1 ? z : zk * z);
            acc0 += zk * series[3 * k];
            acc1 += zk * series[3 * k + 1];
            acc2 += zk * series[3 * k + 2];
        }
        const double e = exp(-a * t);
        ec = e * acc0, es = e * acc1, esp = e * acc2;
    } else {
        const double x = sqrt(fabs(z));
        if (beta > 0.0) {
            const double b = sqrt(beta);
            const double ep = exp(-(a - b) * t), em = exp(-(a + b) * t);
            ec = 0.5 * (ep + em);
            es = (0.5 * (ep - em)) / x;
        } else {
            const double e = exp(-a * t);
            ec = e * cos(x);
            es = (e * sin(x)) / x;
        }
        esp = (ec - es) / (2.0 * z);
    }
    /* _nc_finish */
    const double g = ec + (a * t) * es;
    const double dg_da = t * (es - g);
    const double dg_db2 = (t * t) * (0.5 * es + (a * t) * esp);
    *g_out = g;
    *dti_out = dg_da * ((-2.0 * a) * a) + dg_db2 * (((4.0 * a) * a) * (1.0 / ts - a));
    *dts_out = dg_db2 * (((2.0 * a) / ts) / ts);
}

/* one oscillator's parameters for relaxation_at at many times: Python's max(inertia, 0.0), the
   discriminant, the overdamped branch and its rates, computed once */
typedef struct {
    double ts, ti, disc, a, beta, z_series;
    int over;
    const double *series;
} Relaxation;

static inline Relaxation relaxation_setup(double ts, double ti_in, double u_switch2, double z_series,
                                          const double *series) {
    Relaxation rx;
    rx.ts = ts;
    rx.ti = 0.0 > ti_in ? 0.0 : ti_in;
    rx.disc = 1.0 - (4.0 * rx.ti) / ts;
    rx.over = rx.disc >= u_switch2;
    rx.a = 0.5 / rx.ti;
    rx.beta = (rx.a * rx.a) * rx.disc;
    rx.z_series = z_series;
    rx.series = series;
    return rx;
}

static inline void relaxation_of(const Relaxation *rx, double t, double *g, double *dts, double *dti) {
    relaxation_at(t, rx->ts, rx->ti, rx->disc, rx->over, rx->a, rx->beta, rx->z_series, rx->series, g, dts, dti);
}

/* oscillator_jacobian(n, t, plateau, initial, ts, ti, u_switch2, z_series, series, jac): the
   oscillator's Jacobian at n times (grpofit.laws.oscillator.raw_oscillator_jacobian, scalar
   parameters) into jac (4, n): 1 - g, g, gain dg/dTs, gain dg/dTi */
static PyObject *oscillator_jacobian(PyObject *self, PyObject *args) {
    PyObject *o[3];
    Py_ssize_t n;
    double plateau, initial, ts, ti_in, u_switch2, z_series;
    if (!PyArg_ParseTuple(args, "nOddddddOO", &n, &o[0], &plateau, &initial, &ts, &ti_in, &u_switch2, &z_series,
                          &o[1], &o[2]))
        return NULL;
    if (n < 0) {
        PyErr_SetString(PyExc_ValueError, "oscillator_jacobian: bad sizes");
        return NULL;
    }
    Py_buffer v[3];
    const Py_ssize_t items[3] = {n, 18, mul(4, n)};
    const char *names[3] = {"t", "series", "jac"};
    if (get_all(o, v, 3, 0, 2, items, names) < 0)
        return NULL;
    const double *t = (const double *)v[0].buf, *series = (const double *)v[1].buf;
    double *jac = (double *)v[2].buf;
    const Relaxation rx = relaxation_setup(ts, ti_in, u_switch2, z_series, series);
    const double gain = initial - plateau;
    for (Py_ssize_t i = 0; i < n; i++) {
        double g, dts, dti;
        relaxation_of(&rx, t[i], &g, &dts, &dti);
        jac[i] = 1.0 - g;
        jac[n + i] = g;
        jac[2 * n + i] = dts * gain;
        jac[3 * n + i] = dti * gain;
    }
    release(v, 3);
    Py_RETURN_NONE;
}

/* oscillator_residuals(n, t, sw, y, plateau, initial, ts, ti, u_switch2, z_series, series, c_ts,
   c_ti, r, jac): the least-squares solve's weighted residuals and Jacobian in its internal
   coordinates (grpofit/fitting/solve.py, _Problem.evaluate with every parameter free): r =
   sw ((plateau + gain g) - y) into r (n), the Jacobian's rows weighted by sw, the timescale's
   and the inertia's multiplied by their chain factors c_ts (the timescale) and c_ti (2 sqrt
   inertia) into jac (4, n) */
static PyObject *oscillator_residuals(PyObject *self, PyObject *args) {
    PyObject *o[6];
    Py_ssize_t n;
    double plateau, initial, ts, ti_in, u_switch2, z_series, c_ts, c_ti;
    if (!PyArg_ParseTuple(args, "nOOOddddddOddOO", &n, &o[0], &o[1], &o[2], &plateau, &initial, &ts, &ti_in,
                          &u_switch2, &z_series, &o[3], &c_ts, &c_ti, &o[4], &o[5]))
        return NULL;
    if (n < 0) {
        PyErr_SetString(PyExc_ValueError, "oscillator_residuals: bad sizes");
        return NULL;
    }
    Py_buffer v[6];
    const Py_ssize_t items[6] = {n, n, n, 18, n, mul(4, n)};
    const char *names[6] = {"t", "sw", "y", "series", "r", "jac"};
    if (get_all(o, v, 6, 0, 4, items, names) < 0)
        return NULL;
    const double *t = (const double *)v[0].buf, *sw = (const double *)v[1].buf, *y = (const double *)v[2].buf;
    const double *series = (const double *)v[3].buf;
    double *r = (double *)v[4].buf, *jac = (double *)v[5].buf;
    const Relaxation rx = relaxation_setup(ts, ti_in, u_switch2, z_series, series);
    const double gain = initial - plateau;
    for (Py_ssize_t i = 0; i < n; i++) {
        double g, dts, dti;
        relaxation_of(&rx, t[i], &g, &dts, &dti);
        const double w = sw[i];
        r[i] = w * ((plateau + gain * g) - y[i]);
        jac[i] = (1.0 - g) * w;
        jac[n + i] = g * w;
        jac[2 * n + i] = ((dts * gain) * w) * c_ts;
        jac[3 * n + i] = ((dti * gain) * w) * c_ti;
    }
    release(v, 6);
    Py_RETURN_NONE;
}

/* rolling_median(n, h, v, out): the centred rolling median of v over 2h + 1 points, the window
   shrinking at both ends (grpofit/fitting/collapse.py, rolling_median, for finite values):
   the window's values kept sorted as it slides (the point leaving found by bisection and taken
   out, the one entering put in at its place), so every median is the same order statistic, or
   the mean of the two middle ones of an even edge window, 0.5 (a + b), as numpy takes them */
static PyObject *rolling_median(PyObject *self, PyObject *args) {
    PyObject *o[2];
    Py_ssize_t n, h;
    if (!PyArg_ParseTuple(args, "nnOO", &n, &h, &o[0], &o[1]))
        return NULL;
    if (n < 1 || h < 0) {
        PyErr_SetString(PyExc_ValueError, "rolling_median: bad sizes");
        return NULL;
    }
    Py_buffer v[2];
    const Py_ssize_t items[2] = {n, n};
    const char *names[2] = {"v", "out"};
    if (get_all(o, v, 2, 0, 1, items, names) < 0)
        return NULL;
    const double *x = (const double *)v[0].buf;
    double *out = (double *)v[1].buf;
    double *buf = PyMem_Malloc((size_t)(2 * h + 2) * sizeof(double));
    if (buf == NULL) {
        release(v, 2);
        return PyErr_NoMemory();
    }
    Py_BEGIN_ALLOW_THREADS
    Py_ssize_t c = 0; /* values in the window */
    for (Py_ssize_t i = 0; i < n; i++) {
        if (i - h - 1 >= 0) { /* the point leaving: the first slot holding its value */
            const double a = x[i - h - 1];
            Py_ssize_t lo = 0, hi = c;
            while (lo < hi) {
                const Py_ssize_t mid = (lo + hi) / 2;
                if (buf[mid] < a)
                    lo = mid + 1;
                else
                    hi = mid;
            }
            memmove(buf + lo, buf + lo + 1, (size_t)(c - lo - 1) * sizeof(double));
            c--;
        }
        for (Py_ssize_t j = i == 0 ? 0 : i + h; j <= i + h && j < n; j++) { /* the points entering */
            const double a = x[j];
            Py_ssize_t lo = 0, hi = c;
            while (lo < hi) {
                const Py_ssize_t mid = (lo + hi) / 2;
                if (buf[mid] <= a)
                    lo = mid + 1;
                else
                    hi = mid;
            }
            memmove(buf + lo + 1, buf + lo, (size_t)(c - lo) * sizeof(double));
            buf[lo] = a;
            c++;
        }
        out[i] = c == 2 * h + 1 ? buf[h] : 0.5 * (buf[(c - 1) / 2] + buf[c / 2]);
    }
    Py_END_ALLOW_THREADS
    PyMem_Free(buf);
    release(v, 2);
    Py_RETURN_NONE;
}

/* ---------------------------------------------------------------------------------------------
   The forecaster's search objective (grpofit/forecasting/filtered.py): the negative log marginal
   likelihood of one law with its random-walk level drift, by a Kalman filter over the points
   instead of the dense covariance's Cholesky factor (grpofit/forecasting/walk.py's
   search_objective; the same Gaussian likelihood, equal to round-off, tests/test_filtered.py).
   The forcing is the law's continuous-time system e' = A e + B xi (m = 1 or 2 states, observed
   as H e) started at rest at t = 0, the walk a third state started at 0, and the levels (the
   columns of X with a N(0, u2 I) prior around the residual's mean) are integrated out by the
   augmented filter: every column runs through the same gains, and the Gram matrix of the
   innovations gives the levels' solve (Woodbury) at the end. */

/* exp(A t) of a 1 x 1 or 2 x 2 matrix (row-major), for real, repeated and complex eigenvalues:
   e^{st} [c I + sh (A - s I)] with s half the trace, from cosh / sinh (or cos / sin) of d t,
   d^2 = s^2 - det; far apart roots (d t >= 1) each exponential on its own (no overflow) */
static void expm_small(int m, const double *A, double t, double *F) {
    if (m == 1) {
        F[0] = exp(A[0] * t);
        return;
    }
    const double s = 0.5 * (A[0] + A[3]);
    const double d2 = s * s - (A[0] * A[3] - A[1] * A[2]);
    double c, sh;
    if (d2 >= 0.0) {
        const double d = sqrt(d2), x = d * t;
        if (x < 1.0) {
            const double es = exp(s * t);
            c = es * cosh(x);
            sh = es * (x > 0.0 ? sinh(x) / d : t);
        } else {
            const double ep = exp((s + d) * t), em = exp((s - d) * t);
            c = 0.5 * (ep + em);
            sh = (ep - em) / (2.0 * d);
        }
    } else {
        const double w = sqrt(-d2), x = w * t, es = exp(s * t);
        c = es * cos(x);
        sh = es * (x > 0.0 ? sin(x) / w : t);
    }
    F[0] = c + sh * (A[0] - s);
    F[1] = sh * A[1];
    F[2] = sh * A[2];
    F[3] = c + sh * (A[3] - s);
}

/* the stationary covariance: A S + S A' + W = 0 (1 x 1 or 2 x 2, W symmetric); 0 when singular */
static int lyapunov_small(int m, const double *A, const double *W, double *S) {
    if (m == 1) {
        S[0] = -W[0] / (2.0 * A[0]);
        return isfinite(S[0]) && S[0] >= 0.0;
    }
    /* unknowns (S11, S12, S22): rows 2 a11 x + 2 a12 y = -W11, a21 x + (a11 + a22) y + a12 z = -W12,
       2 a21 y + 2 a22 z = -W22, by Cramer's rule */
    const double m00 = 2.0 * A[0], m01 = 2.0 * A[1], m10 = A[2], m11 = A[0] + A[3], m12 = A[1];
    const double m21 = 2.0 * A[2], m22 = 2.0 * A[3];
    const double b0 = -W[0], b1 = -W[1], b2 = -W[3];
    const double det = m00 * (m11 * m22 - m12 * m21) - m01 * (m10 * m22);
    if (!(det != 0.0) || !isfinite(det))
        return 0;
    const double x = (b0 * (m11 * m22 - m12 * m21) - m01 * (b1 * m22 - m12 * b2)) / det;
    const double y = (m00 * (b1 * m22 - m12 * b2) - b0 * (m10 * m22)) / det;
    const double z = (m00 * (m11 * b2 - b1 * m21) - m01 * (m10 * b2) + b0 * (m10 * m21)) / det;
    S[0] = x;
    S[1] = S[2] = y;
    S[3] = z;
    return isfinite(x) && isfinite(y) && isfinite(z);
}

/* The augmented filter's state after the last point: the forcing's and the walk's covariance P
   (M x M, M = m + 1), the filtered state of each column a (column 0 the residual, then X's), the
   Gram matrix G of the standardised innovations (lower triangle) and the innovations' log
   determinant. */
typedef struct {
    double P[3][3], a[4][3], G[4][4], logdet;
} WalkState;

/* the forcing's stationary covariance (sd2 W) and, over dt, F and the noise gained Q = Sig - F Sig F' */
static void gained(int m, const double *A, const double *Sig, double dt, double *F, double *Q) {
    expm_small(m, A, dt, F);
    for (int i = 0; i < m; i++)
        for (int j = 0; j < m; j++) {
            double acc = 0.0;
            for (int a = 0; a < m; a++)
                for (int b = 0; b < m; b++)
                    acc += F[i * m + a] * Sig[a * m + b] * F[j * m + b];
            Q[i * m + j] = Sig[i * m + j] - acc;
        }
}

/* The filter over the n points (see walk_nll for the arguments); FQ: scratch of 8 D doubles.
   0 where it fails (a variance not positive, a value not finite). Inlined into walk_run for each
   (m, p) with both constant, so that the compiler unrolls the small loops (the same operations
   in the same order: the same bits). */
static inline __attribute__((always_inline)) int walk_run_mp(Py_ssize_t n, const int m, const int p, Py_ssize_t D, double qw, double sd2, const int64_t *step_of,
                    const double *A, const double *W, const double *H, const double *dts, const double *resid,
                    const double *X, const double *obs_var, double *FQ, WalkState *st) {
    double Sig[4], Ws[4];
    for (int i = 0; i < m * m; i++)
        Ws[i] = sd2 * W[i];
    int ok = lyapunov_small(m, A, Ws, Sig);
    for (Py_ssize_t k = 0; ok && k < D; k++) /* Q = Sig - F Sig F' */
        gained(m, A, Sig, dts[k], FQ + 8 * k, FQ + 8 * k + 4);
    const int M = m + 1, C = p + 1; /* states (the forcing's, then the walk); columns */
    double(*P)[3] = st->P, (*a)[3] = st->a, (*G)[4] = st->G, h[3];
    memset(st, 0, sizeof(*st));
    for (int i = 0; i < m; i++)
        h[i] = H[i];
    h[m] = 1.0;
    double logdet = 0.0;
    for (Py_ssize_t j = 0; ok && j < n; j++) {
        const Py_ssize_t k = (Py_ssize_t)step_of[j];
        if (dts[k] != 0.0) { /* predict: the forcing block moves by F and gains Q, the walk by qw dt */
            const double *F = FQ + 8 * k, *Q = F + 4;
            double T[3][3];
            for (int i = 0; i < m; i++)
                for (int c = 0; c < M; c++) {
                    double acc = 0.0;
                    for (int b = 0; b < m; b++)
                        acc += F[i * m + b] * P[b][c];
                    T[i][c] = acc;
                }
            for (int c = 0; c < M; c++)
                T[m][c] = P[m][c];
            for (int i = 0; i < M; i++)
                for (int c = 0; c < m; c++) {
                    double acc = 0.0;
                    for (int b = 0; b < m; b++)
                        acc += T[i][b] * F[c * m + b];
                    P[i][c] = acc + (i < m ? Q[i * m + c] : 0.0);
                }
            for (int i = 0; i < M; i++)
                P[i][m] = T[i][m];
            P[m][m] += qw * dts[k];
            for (int c = 0; c < C; c++) {
                double z[2];
                for (int i = 0; i < m; i++) {
                    double acc = 0.0;
                    for (int b = 0; b < m; b++)
                        acc += F[i * m + b] * a[c][b];
                    z[i] = acc;
                }
                for (int i = 0; i < m; i++)
                    a[c][i] = z[i];
            }
        }
        double Ph[3], s = obs_var[j];
        for (int i = 0; i < M; i++) {
            double acc = 0.0;
            for (int b = 0; b < M; b++)
                acc += P[i][b] * h[b];
            Ph[i] = acc;
            s += h[i] * acc;
        }
        if (!(s > 0.0) || !isfinite(s)) {
            ok = 0;
            break;
        }
        logdet += log(s);
        double e[4];
        for (int c = 0; c < C; c++) {
            double pred = 0.0;
            for (int i = 0; i < M; i++)
                pred += h[i] * a[c][i];
            e[c] = (c == 0 ? resid[j] : X[j * p + (c - 1)]) - pred;
        }
        for (int c = 0; c < C; c++) {
            for (int d = 0; d <= c; d++)
                G[c][d] += e[c] * e[d] / s;
            for (int i = 0; i < M; i++)
                a[c][i] += Ph[i] * (e[c] / s);
        }
        for (int i = 0; i < M; i++)
            for (int b = 0; b < M; b++)
                P[i][b] -= Ph[i] * Ph[b] / s;
    }
    st->logdet = logdet;
    return ok;
}

static int walk_run(Py_ssize_t n, int m, int p, Py_ssize_t D, double qw, double sd2, const int64_t *step_of,
                    const double *A, const double *W, const double *H, const double *dts, const double *resid,
                    const double *X, const double *obs_var, double *FQ, WalkState *st) {
#define WALK_RUN(M_, P_) walk_run_mp(n, M_, P_, D, qw, sd2, step_of, A, W, H, dts, resid, X, obs_var, FQ, st)
    switch (m * 4 + p) {
    case 1 * 4 + 1: return WALK_RUN(1, 1);
    case 1 * 4 + 2: return WALK_RUN(1, 2);
    case 1 * 4 + 3: return WALK_RUN(1, 3);
    case 2 * 4 + 1: return WALK_RUN(2, 1);
    case 2 * 4 + 2: return WALK_RUN(2, 2);
    default: return WALK_RUN(2, 3);
    }
#undef WALK_RUN
}

/* The levels' solve after the filter (Woodbury with N = I / u2 + X' K^-1 X, by its Cholesky
   factor L, p x p) and the negative log marginal likelihood (inf where it fails); z = L^-1 X' K^-1 r
   and quad = r' K^-1 r - z'z, for a caller that needs the levels' posterior. */
static double walk_finish(Py_ssize_t n, int p, int known, double u2, const WalkState *st, double L[3][3],
                          double z[3], double *quad_out) {
    const double(*G)[4] = st->G;
    double quad = G[0][0], logdet_n = 0.0;
    memset(L, 0, 9 * sizeof(double));
    for (int i = 0; i < p; i++) {
        for (int j = 0; j <= i; j++) {
            double acc = G[1 + i][1 + j] + (i == j ? 1.0 / u2 : 0.0);
            for (int b = 0; b < j; b++)
                acc -= L[i][b] * L[j][b];
            if (i == j) {
                if (!(acc > 0.0))
                    return INFINITY;
                L[i][i] = sqrt(acc);
            } else
                L[i][j] = acc / L[j][j];
        }
    }
    for (int i = 0; i < p; i++) {
        double acc = G[1 + i][0];
        for (int b = 0; b < i; b++)
            acc -= L[i][b] * z[b];
        z[i] = acc / L[i][i];
        quad -= z[i] * z[i];
        logdet_n += 2.0 * log(L[i][i]);
    }
    *quad_out = quad;
    double nll = INFINITY;
    const double ld = st->logdet + (double)p * log(u2) + logdet_n, LOG2PI = log(2.0 * M_PI);
    if (known)
        nll = 0.5 * (quad + ld + (double)n * LOG2PI);
    else if (quad > 0.0)
        nll = 0.5 * ((double)n * log(quad / (double)n) + ld + (double)n * (LOG2PI + 1.0));
    return isfinite(nll) ? nll : INFINITY;
}

/* walk_nll(n, m, p, D, known, qw, u2, sd2, step_of, A, W, H, dts, resid, X, obs_var): the negative log
   marginal likelihood (inf where the filter fails: a variance not positive, a value not finite).
   A, W = B B' at unit forcing sd (m x m; the forcing's covariance is sd2 times that), H (m);
   dts (D): the distinct spacings, step_of (n, int64): the spacing
   before each point (from t = 0); resid (n): y less the levels' prior mean; X (n, p); obs_var (n);
   known: the observation variance is absolute (else profiled: its scale is maximised out). */
static PyObject *walk_nll(PyObject *self, PyObject *args) {
    PyObject *o[8];
    Py_ssize_t n, m, p, D;
    int known;
    double qw, u2, sd2;
    if (!PyArg_ParseTuple(args, "nnnnpdddOOOOOOOO", &n, &m, &p, &D, &known, &qw, &u2, &sd2, &o[0], &o[1], &o[2], &o[3],
                          &o[4], &o[5], &o[6], &o[7]))
        return NULL;
    if (n < 1 || m < 1 || m > 2 || p < 1 || p > 3 || D < 1) {
        PyErr_SetString(PyExc_ValueError, "walk_nll: bad sizes");
        return NULL;
    }
    /* step_of (n) int64; A, W (m, m); H (m); dts (D); resid (n); X (n, p); obs_var (n) */
    Py_buffer v[8];
    const Py_ssize_t items[8] = {n, m * m, m * m, m, D, n, mul(n, p), n};
    const char *names[8] = {"step_of", "A", "W", "H", "dts", "resid", "X", "obs_var"};
    if (get_all(o, v, 8, 1, 8, items, names) < 0)
        return NULL;
    const int64_t *step_of = (const int64_t *)v[0].buf;
    const double *A = (const double *)v[1].buf, *W = (const double *)v[2].buf, *H = (const double *)v[3].buf;
    const double *dts = (const double *)v[4].buf, *resid = (const double *)v[5].buf, *X = (const double *)v[6].buf;
    const double *obs_var = (const double *)v[7].buf;
    for (Py_ssize_t j = 0; j < n; j++)
        if (step_of[j] < 0 || step_of[j] >= D) {
            release(v, 8);
            PyErr_SetString(PyExc_ValueError, "walk_nll: step_of out of range");
            return NULL;
        }
    double *FQ = PyMem_Malloc(8 * D * sizeof(double)); /* per spacing: F (m x m), then Q (m x m) */
    if (FQ == NULL) {
        release(v, 8);
        return PyErr_NoMemory();
    }
    double nll = INFINITY;
    Py_BEGIN_ALLOW_THREADS
    WalkState st;
    if (walk_run(n, (int)m, (int)p, D, qw, sd2, step_of, A, W, H, dts, resid, X, obs_var, FQ, &st)) {
        double L[3][3], z[3], quad;
        nll = walk_finish(n, (int)p, known, u2, &st, L, z, &quad);
    }
    Py_END_ALLOW_THREADS
    PyMem_Free(FQ);
    release(v, 8);
    return PyFloat_FromDouble(nll);
}

/* ---------------------------------------------------------------------------------------------
   The forecaster's search at many points in one call (grpofit/forecasting/filtered.py): for each
   parameter point, the law's times from their log coordinates and its forcing's system, then the
   filter above. L-BFGS-B's finite-difference gradient (1 + k points) and the Laplace Hessian
   (1 + 2k^2 points) are each one call, where they were one Python evaluation per point. The
   system performs the operations of the law's Python form (grpofit/laws/exponential.py,
   two_modes.py and oscillator.py: from_log, then kalman at forcing sd 1, W = B B'), so the
   values are filtered.py's walk_nll evaluations to the bit; the mean's design (the law's
   columns) comes from Python, one per distinct set of times. The codes are filtered.py's
   LAW_CODES. */

enum { LAW_ONE = 0, LAW_TWO = 1, LAW_OSCILLATOR = 2 };

/* the number of log coordinates of a law's search vector (its times, log sd, log q), its states
   and its levels; 0: no such law */
static int law_sizes(int code, int *m, int *p) {
    *m = code == LAW_OSCILLATOR ? 2 : 1;
    *p = code == LAW_TWO ? 3 : 2;
    return code == LAW_ONE ? 3 : (code == LAW_TWO || code == LAW_OSCILLATOR) ? 4 : 0;
}

/* One law's forcing at the log times theta (the first coordinates of its search vector): A, W = B B'
   (forcing sd 1) and H */
static void law_system(int code, const double *theta, double *A, double *W, double *H) {
    if (code == LAW_OSCILLATOR) { /* times (exp th0, exp th1); B = (0, q / ti)' */
        const double ts = exp(theta[0]), ti = exp(theta[1]), q = sqrt(2.0 * 1.0 * 1.0 / ts), b = q / ti;
        A[0] = 0.0;
        A[1] = 1.0;
        A[2] = -1.0 / (ti * ts);
        A[3] = -1.0 / ti;
        W[0] = W[1] = W[2] = 0.0 * 0.0;
        W[3] = b * b;
        H[0] = 1.0;
        H[1] = 0.0;
        return;
    }
    /* one: T = exp th0; two: times (slow / (2 exp th1), slow = exp th0), the forcing on the slow one */
    const double T = exp(theta[0]), b = sqrt(2.0 * 1.0 * 1.0 / T);
    A[0] = -1.0 / T;
    W[0] = b * b;
    H[0] = 1.0;
}

/* walk_search(code, n, D, known, u2, K, U, step_of, dts, resid, obs_var, thetas, X, xi, out): the
   negative log marginal likelihood (walk_nll's) of law ``code`` at each row of thetas (K x k, k its
   coordinates) into out (K); X (U, n, p): the law's designs at the seen points, row r's is
   X[xi[r]] (xi: K int64); the rest as walk_nll. */
static PyObject *walk_search(PyObject *self, PyObject *args) {
    PyObject *o[8];
    int code, known, m, p;
    Py_ssize_t n, D, K, U;
    double u2;
    if (!PyArg_ParseTuple(args, "innpdnnOOOOOOOO", &code, &n, &D, &known, &u2, &K, &U, &o[0], &o[1], &o[2], &o[3],
                          &o[4], &o[5], &o[6], &o[7]))
        return NULL;
    const int k = law_sizes(code, &m, &p);
    if (n < 1 || D < 1 || K < 0 || U < 0 || k == 0) {
        PyErr_SetString(PyExc_ValueError, "walk_search: bad sizes or law");
        return NULL;
    }
    /* step_of (n), xi (K) int64; dts (D); resid, obs_var (n); thetas (K, k); X (U, n, p); out (K) */
    PyObject *order[8] = {o[0], o[6], o[1], o[2], o[3], o[4], o[5], o[7]};
    Py_buffer v[8];
    const Py_ssize_t items[8] = {n, K, D, n, n, mul(K, k), mul(U, mul(n, p)), K};
    const char *names[8] = {"step_of", "xi", "dts", "resid", "obs_var", "thetas", "X", "out"};
    if (get_all(order, v, 8, 2, 7, items, names) < 0)
        return NULL;
    const int64_t *step_of = (const int64_t *)v[0].buf, *xi = (const int64_t *)v[1].buf;
    const double *dts = (const double *)v[2].buf, *resid = (const double *)v[3].buf;
    const double *obs_var = (const double *)v[4].buf, *thetas = (const double *)v[5].buf, *X = (const double *)v[6].buf;
    double *out = (double *)v[7].buf;
    const char *bad = NULL;
    for (Py_ssize_t j = 0; j < n && !bad; j++)
        if (step_of[j] < 0 || step_of[j] >= D)
            bad = "walk_search: step_of out of range";
    for (Py_ssize_t r = 0; r < K && !bad; r++)
        if (xi[r] < 0 || xi[r] >= U)
            bad = "walk_search: xi out of range";
    if (bad) {
        release(v, 8);
        PyErr_SetString(PyExc_ValueError, bad);
        return NULL;
    }
    double *FQ = PyMem_Malloc(8 * D * sizeof(double));
    if (FQ == NULL) {
        release(v, 8);
        return PyErr_NoMemory();
    }
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t r = 0; r < K; r++) {
        double A[4], W[4], H[2], sd2, qw, L[3][3], z[3], quad;
        WalkState st;
        law_system(code, thetas + r * k, A, W, H);
        sd2 = exp(2.0 * thetas[r * k + k - 2]);
        qw = exp(thetas[r * k + k - 1]);
        out[r] = INFINITY;
        if (isfinite(sd2) && isfinite(qw) &&
            walk_run(n, m, p, D, qw, sd2, step_of, A, W, H, dts, resid, X + xi[r] * n * p, obs_var, FQ, &st))
            out[r] = walk_finish(n, p, known, u2, &st, L, z, &quad);
    }
    Py_END_ALLOW_THREADS
    PyMem_Free(FQ);
    release(v, 8);
    Py_RETURN_NONE;
}

/* ---------------------------------------------------------------------------------------------
   The predictive of a law at one parameter point by the same filter (grpofit/forecasting/filtered.py's
   conditional, standing for grpofit/forecasting/predictive.py's dense _conditional: the same
   Gaussian conditional to round-off, tests/test_filtered.py). After the last seen point (time T)
   the filter holds, for the levels' offsets d = beta - b0 given, the state s_T ~ N(a0 - A_X d, P);
   the offsets' posterior is N(mu, Sigma), Sigma = N^-1 (walk_finish's factor L of N). A future time
   tau >= T has s(tau) = Phi(tau - T) s_T + eta(tau) (Phi: the forcing's F, the walk's 1; eta the
   noise gained since T, Cov(eta_i, eta_j) = Phi(tau_j - tau_i) Q(tau_i - T) for tau_i <= tau_j) and
   the latent z(tau) = Xf(tau) (b0 + d) + c' s(tau), c = (H, 1). With g = Phi' c and
   u = Xf - g' A_X: mean = Xf b0 + u mu + g' a0, cov_ij = u_i Sigma u_j' + g_i' P g_j + c' Phi Q c. */

/* The oscillator's unit response started at rest, as grpofit/laws/oscillator.py's scalar path computes
   it (_overdamped, or _near_critical's series / closed form; its exp is the C library's, not
   numpy's: equal to round-off, which the predictive, unlike the search's path, does not amplify) */
static double osc_relaxation(double t, double ts, double ti) {
    static const double Cs[6] = {1.0, 1.0 / 2.0, 1.0 / 24.0, 1.0 / 720.0, 1.0 / 40320.0, 1.0 / 3628800.0};
    static const double Ss[6] = {1.0, 1.0 / 6.0, 1.0 / 120.0, 1.0 / 5040.0, 1.0 / 362880.0, 1.0 / 39916800.0};
    ti = np_max(ti, 0.0);
    const double disc = 1.0 - 4.0 * ti / ts;
    if (disc >= 0.3 * 0.3) { /* _overdamped */
        const double u = sqrt(disc), t1 = 0.5 * ts * (1.0 + u), t2 = 2.0 * ti / (1.0 + u), d = ts * u;
        const double e1 = exp(np_max(-(t / t1), -700.0));
        const double x2 = -np_max(-(t / np_max(t2, 1e-300)), -700.0);
        return (t1 * e1 - t2 * exp(-x2)) / d;
    }
    const double a = 0.5 / ti, beta = a * a * disc, z = beta * t * t; /* _near_critical */
    double ec, es;
    if (fabs(z) < 0.05) { /* _nc_series */
        double zk = 1.0, c = 0.0, s = 0.0;
        for (int k = 0; k < 6; k++) {
            c += zk * Cs[k];
            s += zk * Ss[k];
            zk *= z;
        }
        const double e = exp(-a * t);
        ec = e * c;
        es = e * s;
    } else if (beta > 0.0) { /* _nc_closed, overdamped side */
        const double x = sqrt(fabs(z)), b = sqrt(beta), ep = exp(-(a - b) * t), em = exp(-(a + b) * t);
        ec = 0.5 * (ep + em);
        es = 0.5 * (ep - em) / x;
    } else { /* _nc_closed, underdamped side */
        const double x = sqrt(fabs(z)), e = exp(-a * t);
        ec = e * cos(x);
        es = e * sin(x) / x;
    }
    return ec + a * t * es;
}

/* the law's design (its statespace design: 1, then its columns) at the n times t into X (n, p), for
   its log times theta */
static void law_design(int code, const double *theta, Py_ssize_t n, const double *t, double *X) {
    const double t0 = exp(theta[0]), t1 = code == LAW_ONE ? 0.0 : exp(theta[1]);
    const double fast = t0 / (2.0 * t1); /* two's times: (slow / (2 exp th1), slow = exp th0) */
    for (Py_ssize_t j = 0; j < n; j++) {
        if (code == LAW_OSCILLATOR) {
            X[2 * j] = 1.0;
            X[2 * j + 1] = osc_relaxation(t[j], t0, t1);
        } else if (code == LAW_TWO) {
            X[3 * j] = 1.0;
            X[3 * j + 1] = exp(-t[j] / fast);
            X[3 * j + 2] = exp(-t[j] / t0);
        } else {
            X[2 * j] = 1.0;
            X[2 * j + 1] = exp(-t[j] / t0);
        }
    }
}

/* walk_conditional(code, n, D, nf, known, u2, sd2, qw, times, step_of, dts, t, resid, obs_var, tf, b0, mean,
   cov, beta, beta_cov): the latent at the nf times tf (each >= t[n - 1], the last seen time) given
   the seen points at times t, for law ``code`` at log times ``times`` with forcing sd^2 sd2 and walk
   qw: its mean (nf) and covariance (nf x nf), the levels' posterior mean (p) and covariance
   (p x p), all in units of the profiled scale when the noise is not known; returns (nll, quad)
   (quad: the residual's quadratic form, the profiled scale's n times), or None where the filter
   fails. The rest as walk_nll; b0 (p) the levels' prior mean. */
static PyObject *walk_conditional(PyObject *self, PyObject *args) {
    PyObject *o[12];
    int code, known, m, p;
    Py_ssize_t n, D, nf;
    double u2, sd2, qw;
    if (!PyArg_ParseTuple(args, "innnpdddOOOOOOOOOOOO", &code, &n, &D, &nf, &known, &u2, &sd2, &qw, &o[0], &o[1], &o[2],
                          &o[3], &o[4], &o[5], &o[6], &o[7], &o[8], &o[9], &o[10], &o[11]))
        return NULL;
    const int k = law_sizes(code, &m, &p);
    if (n < 1 || D < 1 || nf < 1 || k == 0) {
        PyErr_SetString(PyExc_ValueError, "walk_conditional: bad sizes or law");
        return NULL;
    }
    /* step_of (n) int64; times (k - 2); dts (D); t, resid, obs_var (n); tf (nf); b0 (p);
       out: mean (nf), cov (nf, nf), beta (p), beta_cov (p, p) */
    PyObject *order[12] = {o[1], o[0], o[2], o[3], o[4], o[5], o[6], o[7], o[8], o[9], o[10], o[11]};
    Py_buffer v[12];
    const Py_ssize_t items[12] = {n, k - 2, D, n, n, n, nf, p, nf, mul(nf, nf), p, p * p};
    const char *names[12] = {"step_of", "times", "dts", "t", "resid", "obs_var", "tf", "b0", "mean", "cov", "beta",
                             "beta_cov"};
    if (get_all(order, v, 12, 1, 8, items, names) < 0)
        return NULL;
    const int64_t *step_of = (const int64_t *)v[0].buf;
    const double *times = (const double *)v[1].buf, *dts = (const double *)v[2].buf, *t = (const double *)v[3].buf;
    const double *resid = (const double *)v[4].buf, *obs_var = (const double *)v[5].buf, *tf = (const double *)v[6].buf;
    const double *b0 = (const double *)v[7].buf;
    double *mean = (double *)v[8].buf, *cov = (double *)v[9].buf, *beta = (double *)v[10].buf;
    double *bcov = (double *)v[11].buf;
    const double T = t[n - 1];
    const char *bad = NULL;
    for (Py_ssize_t j = 0; j < n && !bad; j++)
        if (step_of[j] < 0 || step_of[j] >= D)
            bad = "walk_conditional: step_of out of range";
    for (Py_ssize_t i = 0; i < nf && !bad; i++)
        if (!(tf[i] >= T))
            bad = "walk_conditional: a time before the last seen one";
    if (bad) {
        release(v, 12);
        PyErr_SetString(PyExc_ValueError, bad);
        return NULL;
    }
    const int M = m + 1;
    double *FQ = PyMem_Malloc((8 * D + (Py_ssize_t)(2 * M + 3 + p + 4) * nf + (Py_ssize_t)p * n) * sizeof(double));
    Py_ssize_t *seq = PyMem_Malloc(nf * sizeof(Py_ssize_t));
    if (FQ == NULL || seq == NULL) {
        PyMem_Free(FQ);
        PyMem_Free(seq);
        release(v, 12);
        return PyErr_NoMemory();
    }
    double *G = FQ + 8 * D, *Qc = G + M * nf, *U = Qc + M * nf; /* per future time: g, Q c, u */
    double *Xf = U + 3 * nf, *X = Xf + p * nf, *Fn = X + p * n; /* the designs at tf and at t; steps */
    int ok;
    double nll = INFINITY, quad = 0.0;
    Py_BEGIN_ALLOW_THREADS
    double A[4], W[4], H[2], Ws[4], Sig[4];
    WalkState st;
    law_system(code, times, A, W, H);
    law_design(code, times, n, t, X);
    law_design(code, times, nf, tf, Xf);
    ok = isfinite(sd2) && isfinite(qw) &&
         walk_run(n, m, p, D, qw, sd2, step_of, A, W, H, dts, resid, X, obs_var, FQ, &st);
    double L[3][3], z[3], mu[3], S[3][3], Li[3][3];
    if (ok) {
        nll = walk_finish(n, p, known, u2, &st, L, z, &quad);
        for (int i = 0; i < p && ok; i++)
            ok = L[i][i] > 0.0;
    }
    if (ok) {
        for (int i = 0; i < m * m; i++)
            Ws[i] = sd2 * W[i];
        lyapunov_small(m, A, Ws, Sig);
        for (int i = p - 1; i >= 0; i--) { /* mu = L^-T z */
            double acc = z[i];
            for (int b = i + 1; b < p; b++)
                acc -= L[b][i] * mu[b];
            mu[i] = acc / L[i][i];
        }
        for (int c = 0; c < p; c++) /* Li = L^-1 (lower), then Sigma = Li' Li */
            for (int i = 0; i < p; i++) {
                double acc = i == c ? 1.0 : 0.0;
                for (int b = c; b < i; b++)
                    acc -= L[i][b] * Li[b][c];
                Li[i][c] = i < c ? 0.0 : acc / L[i][i];
            }
        for (int i = 0; i < p; i++)
            for (int j = 0; j < p; j++) {
                double acc = 0.0;
                for (int b = 0; b < p; b++)
                    acc += Li[b][i] * Li[b][j];
                S[i][j] = acc;
            }
        for (int i = 0; i < p; i++) {
            beta[i] = b0[i] + mu[i];
            for (int j = 0; j < p; j++)
                bcov[i * p + j] = S[i][j];
        }
        for (Py_ssize_t i = 0; i < nf; i++) {
            double F[4], Q[4], *g = G + M * i, *qc = Qc + M * i, *u = U + 3 * i;
            const double dt = tf[i] - T;
            gained(m, A, Sig, dt, F, Q);
            for (int a = 0; a < m; a++) { /* g = F' h (then the walk's 1); Q c */
                double acc = 0.0, accq = 0.0;
                for (int b = 0; b < m; b++) {
                    acc += F[b * m + a] * H[b];
                    accq += Q[a * m + b] * H[b];
                }
                g[a] = acc;
                qc[a] = accq;
            }
            g[m] = 1.0;
            qc[m] = qw * dt;
            double mi = 0.0;
            for (int c = 0; c < p; c++) {
                double acc = Xf[i * p + c];
                for (int a = 0; a < M; a++)
                    acc -= g[a] * st.a[c + 1][a];
                u[c] = acc;
                mi += Xf[i * p + c] * b0[c] + acc * mu[c];
            }
            for (int a = 0; a < M; a++)
                mi += g[a] * st.a[0][a];
            mean[i] = mi;
        }
        for (Py_ssize_t i = 0; i < nf; i++) {
            /* (Sigma u_i, P g_i) into this time's own part of the scratch, then a dot product per pair */
            double su[3], pg[3];
            const double *ui = U + 3 * i, *gi = G + M * i;
            for (int a = 0; a < p; a++) {
                double acc = 0.0;
                for (int b = 0; b < p; b++)
                    acc += S[a][b] * ui[b];
                su[a] = acc;
            }
            for (int a = 0; a < M; a++) {
                double acc = 0.0;
                for (int b = 0; b < M; b++)
                    acc += st.P[a][b] * gi[b];
                pg[a] = acc;
            }
            for (Py_ssize_t j = i; j < nf; j++) {
                const double *uj = U + 3 * j, *gj = G + M * j;
                double acc = su[0] * uj[0] + pg[0] * gj[0] + pg[1] * gj[1];
                for (int a = 1; a < p; a++)
                    acc += su[a] * uj[a];
                for (int a = 2; a < M; a++)
                    acc += pg[a] * gj[a];
                cov[i * nf + j] = acc;
            }
        }
        /* the noise gained since T: c' Phi(later - earlier) Q(earlier - T) c, the times in increasing
           order (seq), Phi' c carried from each time to the later ones by the steps between
           neighbours (exp(A x) exp(A y) = exp(A (x + y))) */
        for (Py_ssize_t i = 0; i < nf; i++) { /* insertion sort of the indices by time */
            Py_ssize_t j = i;
            for (; j > 0 && tf[seq[j - 1]] > tf[i]; j--)
                seq[j] = seq[j - 1];
            seq[j] = i;
        }
        for (Py_ssize_t b = 0; b + 1 < nf; b++)
            expm_small(m, A, tf[seq[b + 1]] - tf[seq[b]], Fn + 4 * b);
        for (Py_ssize_t a = 0; a < nf; a++) {
            const Py_ssize_t lo = seq[a];
            double gl[3] = {H[0], m > 1 ? H[1] : 0.0, 0.0};
            gl[m] = 1.0;
            for (Py_ssize_t b = a; b < nf; b++) {
                if (b > a) {
                    const double *F = Fn + 4 * (b - 1);
                    double z0 = 0.0, z1 = 0.0;
                    for (int y = 0; y < m; y++) {
                        z0 += F[y * m] * gl[y];
                        if (m > 1)
                            z1 += F[y * m + 1] * gl[y];
                    }
                    gl[0] = z0;
                    if (m > 1)
                        gl[1] = z1;
                }
                double acc = 0.0;
                for (int x = 0; x < M; x++)
                    acc += gl[x] * Qc[M * lo + x];
                const Py_ssize_t hi = seq[b], i = lo < hi ? lo : hi, j = lo < hi ? hi : lo;
                cov[i * nf + j] += acc;
            }
        }
        for (Py_ssize_t i = 0; i < nf; i++)
            for (Py_ssize_t j = 0; j < i; j++)
                cov[i * nf + j] = cov[j * nf + i];
    }
    Py_END_ALLOW_THREADS
    PyMem_Free(FQ);
    PyMem_Free(seq);
    release(v, 12);
    if (!ok)
        Py_RETURN_NONE;
    return Py_BuildValue("dd", nll, quad);
}

static PyMethodDef methods[] = {
    /* the least-squares fit's arithmetic */
    {"profile_grid", profile_grid, METH_VARARGS,
     "profile_grid(R, M, nb, t, w, y, yy, sw, wy, zeta, ts, lo, hi, ssr, plat, init, g): the damping ratio's profile grid: shapes into g (R, M, nb), levels and SSR into ssr, plat, init (R, M)"},
    {"oscillator_jacobian", oscillator_jacobian, METH_VARARGS,
     "oscillator_jacobian(n, t, plateau, initial, ts, ti, u_switch2, z_series, series, jac): the oscillator's Jacobian at n times into jac (4, n)"},
    {"oscillator_residuals", oscillator_residuals, METH_VARARGS,
     "oscillator_residuals(n, t, sw, y, plateau, initial, ts, ti, u_switch2, z_series, series, c_ts, c_ti, r, jac): the solve's weighted residuals into r (n) and chained Jacobian into jac (4, n)"},
    {"rolling_median", rolling_median, METH_VARARGS,
     "rolling_median(n, h, v, out): the centred rolling median of v (finite) over 2h + 1 points, shrinking at the ends, into out"},
    /* the state-space intervals' and the forecaster's arithmetic */
    {"innovations", innovations, METH_VARARGS,
     "innovations(n, m, K, S, modes, step_of, FQ, y, cols, wb, count, width, r, G, logdet): the Gram matrices of the filter's standardised innovations into G and log determinants into logdet"},
    {"mixture", mixture, METH_VARARGS,
     "mixture(w, m, s, p0, p1, lo, hi, x0, x1, tol): the points of a normal mixture's CDF at p0 and p1"},
    {"transitions", transitions, METH_VARARGS,
     "transitions(S, K, dt, ts, ti, r, FQ): every cell's forcing transitions over every spacing into FQ (7, S, K)"},
    {"columns", columns, METH_VARARGS,
     "columns(n, K, t, count, d, ts, ti, out): every cell's mode column, averaged over each bin, into out (K, n)"},
    {"levels", levels, METH_VARARGS,
     "levels(m, K, n_obs, noise_var, q, G, logdet, nll, mean, var, ml, resid): each cell's levels' solve from its Gram matrix (noise_var < 0: unknown)"},
    {"walk_nll", walk_nll, METH_VARARGS,
     "walk_nll(n, m, p, D, known, qw, u2, sd2, step_of, A, W, H, dts, resid, X, obs_var): a law's negative log marginal likelihood with its walk, by a Kalman filter"},
    {"walk_search", walk_search, METH_VARARGS,
     "walk_search(code, n, D, known, u2, K, U, step_of, dts, resid, obs_var, thetas, X, xi, out): walk_nll of law code at each of the K rows of thetas (design X[xi[r]]) into out"},
    {"walk_conditional", walk_conditional, METH_VARARGS,
     "walk_conditional(code, n, D, nf, known, u2, sd2, qw, times, step_of, dts, t, resid, obs_var, tf, b0, mean, cov, beta, beta_cov): the latent at tf given the seen points, by the filter; (nll, quad) or None"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_filter", NULL, -1, methods};

PyMODINIT_FUNC PyInit__filter(void) { return PyModule_Create(&module); }
