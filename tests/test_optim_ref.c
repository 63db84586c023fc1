/* The optimizers against references: 100 updates of a 37-element vector,
 * every optimizer under every schedule, compared with TensorFlow's formulas
 * in NumPy float64 and with torch.optim where PyTorch computes the same
 * update (tests/ref/optim_ref.py explains where and how).
 *
 * The script runs with /usr/bin/python3 from the repository root, where the
 * suite runs. The inputs are the formulas below, which the script repeats.
 *
 * Tolerances, and why.
 *   float64 twin vs NumPy, PyTorch vs NumPy, after 100 steps: elementwise
 *     |x - ref| / max(|ref|, 1e-3 * max_j |ref_j|) <= 1e-12
 *     (relative; an element passing through zero is measured against a
 *     thousandth of its vector's scale). PyTorch's RMSProp gets 1e-6: it runs
 *     with eps 0 where TF has 1e-10 inside the sqrt (see the script).
 *   float32 kernel, one update from a float32 state vs the float64 twin from
 *     the same state, every step: normwise per vector (variable, each slot)
 *     max_i |x_i - ref_i| / max_i max(|before_i|, |after_i|) <= 1e-6;
 *     4e-6 for centered RMSProp, whose ms - mg^2 cancels: float32 rounds it
 *     to 2^-24 * ms / (ms - mg^2) of itself (1.4e-6 is measured at decay 0.8).
 *   float32 kernel after 100 steps vs NumPy (and vs PyTorch): normwise,
 *     max_i |x_i - ref_i| / max_i |ref_i| <= 5e-6. 1e-6 elementwise is below
 *     what float32 can hold after 100 updates: each update rounds the
 *     variable to 2^-24 of its size, and a variable passing through zero
 *     keeps the absolute error of its larger past; 1.7e-6 is measured.
 *   learning rates vs NumPy: 1e-13 relative.
 * Each test prints the largest errors it measured.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"
#include "tpuloop/optim.h"

#define STEPS 100
#define N 37
#define SCRIPT "tests/ref/optim_ref.py"
#define PYTHON "/usr/bin/python3"
#define MAX_CASES 24

#define FLOOR 1e-3             /* see vec_err */
#define TOL_STEP 1e-6          /* one float32 update vs the float64 twin */
#define TOL_STEP_CENTERED 4e-6 /* the same for centered RMSProp: ms - mg^2 cancels */
#define TOL_F32 5e-6           /* float32 after STEPS updates, normwise */
#define TOL_F64 1e-12
#define TOL_TORCH 1e-12
#define TOL_TORCH_RMSPROP 1e-6 /* epsilon 1e-10 inside TF's sqrt, 0 in torch's */
#define TOL_LR 1e-13

static double grad_at(int i, int t)
{
    return sin(0.37 * i + 0.11 * t) * (1.0 + 0.01 * t);
}

static double param_at0(int i)
{
    return 0.5 * cos(0.7 * i + 0.3);
}

/* The schedule shapes every optimizer runs under; learning_rate comes from
 * the optimizer's case. */
static const tl_lr_schedule shapes[] = {
    {.kind = TL_LR_CONSTANT},
    {.kind = TL_LR_EXPONENTIAL_DECAY, .decay_steps = 30, .decay_rate = 0.5, .staircase = true},
    {.kind = TL_LR_EXPONENTIAL_DECAY, .decay_steps = 40, .decay_rate = 0.3, .warmup_steps = 10},
    {.kind = TL_LR_COSINE_DECAY, .decay_steps = 60, .alpha = 0.1},
    {.kind = TL_LR_COSINE_DECAY, .decay_steps = 80, .warmup_steps = 15},
};
#define NSHAPES ((int)(sizeof shapes / sizeof shapes[0]))

/* The largest errors seen, for the report. */
typedef struct errs {
    double step;  /* one float32 update vs the float64 twin */
    double f32;   /* float32 kernel vs NumPy */
    double f64;   /* float64 twin vs NumPy */
    double torch; /* PyTorch vs NumPy */
    double f32_torch; /* float32 kernel vs PyTorch */
    double lr;
    int torch_cases;
} errs;

static const char *kind_key(tl_optimizer_kind k)
{
    static const char *keys[] = {"sgd", "momentum", "adagrad", "adam", "rmsprop"};
    return keys[k];
}

static const char *sched_key(tl_lr_kind k)
{
    static const char *keys[] = {"constant", "exponential", "cosine"};
    return keys[k];
}

/* The script's spelling of a configuration (see optim_ref.py). */
static void spec_of(const tl_optimizer_config *c, char *buf, size_t cap)
{
    const tl_lr_schedule *s = &c->lr;
    int n = snprintf(buf, cap,
                     "kind=%s,lr=%.17g,momentum=%.17g,nesterov=%d,init_acc=%.17g,beta1=%.17g,beta2=%.17g,"
                     "eps=%.17g,decay=%.17g,centered=%d,sched=%s,decay_steps=%lld,decay_rate=%.17g,staircase=%d,"
                     "alpha=%.17g,warmup=%lld",
                     kind_key(c->kind), s->learning_rate, c->momentum, c->use_nesterov, c->initial_accumulator_value,
                     c->beta1, c->beta2, c->epsilon, c->decay, c->centered, sched_key(s->kind),
                     (long long)(s->decay_steps > 0 ? s->decay_steps : 1), s->decay_rate, s->staircase, s->alpha,
                     (long long)s->warmup_steps);
    cr_assert(n > 0 && (size_t)n < cap, "spec buffer too small");
}

/* Runs the script on the specs and returns its parsed output. */
static json_t *run_script(char specs[][512], int ncase)
{
    cr_assert(access(SCRIPT, R_OK) == 0,
              "%s is missing: run the test binary from the repository root (make test does)", SCRIPT);
    cr_assert(access(PYTHON, X_OK) == 0, "%s is missing: the reference needs Debian's python3 with numpy and torch",
              PYTHON);
    size_t cap = 128 + (size_t)ncase * 520;
    char *cmd = malloc(cap);
    cr_assert_not_null(cmd);
    int len = snprintf(cmd, cap, "%s %s --steps %d --n %d", PYTHON, SCRIPT, STEPS, N);
    for (int i = 0; i < ncase; i++)
        len += snprintf(cmd + len, cap - (size_t)len, " %s", specs[i]);
    cr_assert((size_t)len < cap);

    json_t *root = tu_run_json(cmd, SCRIPT);
    free(cmd);
    cr_assert_eq(json_array_size(json_object_get(root, "cases")), (size_t)ncase);
    return root;
}

/* The largest error of x against ref (a JSON array of N numbers), each
 * element's error being |x - ref| / max(|ref|, floor * max_j |ref_j|):
 * relative, with elements below floor times the vector's scale measured
 * against that instead. */
static double vec_err(const double *x, const json_t *ref, double floor, const char *what)
{
    cr_assert(json_is_array(ref) && json_array_size(ref) == N, "%s: not an array of %d numbers", what, N);
    double scale = 0.0;
    for (int i = 0; i < N; i++)
        scale = fmax(scale, fabs(json_real_value(json_array_get(ref, (size_t)i))));
    double worst = 0.0;
    for (int i = 0; i < N; i++) {
        double r = json_real_value(json_array_get(ref, (size_t)i));
        double den = fmax(fabs(r), floor * scale);
        double e = den > 0.0 ? fabs(x[i] - r) / den : (x[i] == r ? 0.0 : INFINITY);
        if (!(e <= worst)) /* NaN is the worst */
            worst = isnan(e) ? INFINITY : e;
    }
    return worst;
}

static double arr_err(const json_t *a, const json_t *ref, double floor, const char *what)
{
    double x[N];
    cr_assert(json_is_array(a) && json_array_size(a) == N, "%s: not an array of %d numbers", what, N);
    for (int i = 0; i < N; i++)
        x[i] = json_real_value(json_array_get(a, (size_t)i));
    return vec_err(x, ref, floor, what);
}

static double f32_err(const float *x32, const json_t *ref, const char *what)
{
    double x[N];
    for (int i = 0; i < N; i++)
        x[i] = x32[i];
    return vec_err(x, ref, 1.0, what);
}

/* One update in float32 and in the float64 twin from the same state (the
 * float32 trajectory's, so exactly representable in both) and the same
 * gradient. Returns the largest error over the variable and each slot,
 * normwise per vector: max_i |f32_i - f64_i| / max_i max(|before_i|, |after_i|).
 * (Elementwise, an update that cancels — mu * accum close to -g, or
 * centered RMSProp's ms - mg^2 — loses the float32 digits it must lose.) */
static double one_step_err(const tl_optimizer_config *cfg, const tl_optimizer_step *st, const float *p,
                           float *const *s, const float *g)
{
    float q[1 + TL_OPTIM_MAX_SLOTS][N];
    double d[1 + TL_OPTIM_MAX_SLOTS][N], before[1 + TL_OPTIM_MAX_SLOTS][N], gd[N];
    float *qsp[TL_OPTIM_MAX_SLOTS] = {q[1], q[2], q[3]};
    double *dsp[TL_OPTIM_MAX_SLOTS] = {d[1], d[2], d[3]};
    int ns = tl_optimizer_num_slots(cfg);
    for (int i = 0; i < N; i++) {
        gd[i] = g[i];
        for (int k = 0; k <= ns; k++) {
            q[k][i] = k == 0 ? p[i] : s[k - 1][i];
            d[k][i] = before[k][i] = q[k][i];
        }
    }
    tl_optimizer_apply(cfg, st, q[0], g, qsp, N);
    tl_optimizer_apply_ref(cfg, st, d[0], gd, dsp, N);
    double worst = 0.0;
    for (int k = 0; k <= ns; k++) {
        double scale = 0.0, diff = 0.0;
        for (int i = 0; i < N; i++) {
            scale = fmax(scale, fmax(fabs(d[k][i]), fabs(before[k][i])));
            double e = fabs(q[k][i] - d[k][i]);
            diff = isnan(e) ? INFINITY : fmax(diff, e);
        }
        double e = scale > 0.0 ? diff / scale : (diff == 0.0 ? 0.0 : INFINITY);
        worst = fmax(worst, e);
    }
    return worst;
}

/* Runs one case in C, float32 and float64, and compares. */
static void check_case(const tl_optimizer_config *cfg, const json_t *ref, errs *e)
{
    const char *spec = json_string_value(json_object_get(ref, "spec"));
    float p32[N], g32[N], s32[TL_OPTIM_MAX_SLOTS][N];
    double p64[N], g64[N], s64[TL_OPTIM_MAX_SLOTS][N];
    float *sp32[TL_OPTIM_MAX_SLOTS] = {s32[0], s32[1], s32[2]};
    double *sp64[TL_OPTIM_MAX_SLOTS] = {s64[0], s64[1], s64[2]};
    int ns = tl_optimizer_num_slots(cfg);
    for (int i = 0; i < N; i++) {
        p64[i] = param_at0(i);
        p32[i] = (float)p64[i];
    }
    tl_optimizer_init_slots(cfg, sp32, N);
    for (int k = 0; k < ns; k++)
        for (int i = 0; i < N; i++)
            s64[k][i] = tl_optimizer_slot_init(cfg, k);

    const json_t *lrs = json_object_get(ref, "lr");
    cr_assert_eq(json_array_size(lrs), (size_t)STEPS);
    for (int t = 0; t < STEPS; t++) {
        tl_optimizer_step st;
        tl_status rc = tl_optimizer_step_prepare(cfg, t, &st);
        cr_assert_eq(rc, TL_OK, "%s: %s", spec, tl_last_error());
        double want = json_real_value(json_array_get(lrs, (size_t)t));
        double lr_err = want == 0.0 ? fabs(st.learning_rate) : fabs(st.learning_rate - want) / fabs(want);
        cr_assert(lr_err <= TOL_LR, "%s: learning rate at step %d is %.17g, NumPy %.17g", spec, t,
                  st.learning_rate, want);
        e->lr = fmax(e->lr, lr_err);
        for (int i = 0; i < N; i++) {
            g64[i] = grad_at(i, t);
            g32[i] = (float)g64[i];
        }
        double e1 = one_step_err(cfg, &st, p32, sp32, g32);
        double tol1 = cfg->kind == TL_OPTIM_RMSPROP && cfg->centered ? TOL_STEP_CENTERED : TOL_STEP;
        cr_assert(e1 <= tol1, "%s: step %d: float32 kernel vs float64 twin from the same state: error %.3g > %g",
                  spec, t, e1, tol1);
        e->step = fmax(e->step, e1);
        tl_optimizer_apply(cfg, &st, p32, g32, sp32, N);
        tl_optimizer_apply_ref(cfg, &st, p64, g64, sp64, N);
    }

    const json_t *np = json_object_get(ref, "numpy");
    const json_t *np_slots = json_object_get(np, "slots");
    cr_assert_eq(json_array_size(np_slots), (size_t)ns, "%s: NumPy has %zu slots, tpuloop %d", spec,
                 json_array_size(np_slots), ns);
    double worst32 = f32_err(p32, json_object_get(np, "param"), spec);
    double worst64 = vec_err(p64, json_object_get(np, "param"), FLOOR, spec);
    for (int k = 0; k < ns; k++) {
        worst32 = fmax(worst32, f32_err(s32[k], json_array_get(np_slots, (size_t)k), spec));
        worst64 = fmax(worst64, vec_err(s64[k], json_array_get(np_slots, (size_t)k), FLOOR, spec));
    }
    cr_assert(worst32 <= TOL_F32, "%s: float32 kernel vs NumPy after %d steps: error %.3g > %g", spec, STEPS,
              worst32, TOL_F32);
    cr_assert(worst64 <= TOL_F64, "%s: float64 twin vs NumPy: error %.3g > %g", spec, worst64, TOL_F64);
    e->f32 = fmax(e->f32, worst32);
    e->f64 = fmax(e->f64, worst64);

    const json_t *th = json_object_get(ref, "torch");
    if (json_is_null(th))
        return;
    e->torch_cases++;
    const json_t *th_slots = json_object_get(th, "slots");
    cr_assert_eq(json_array_size(th_slots), (size_t)ns);
    double wt = arr_err(json_object_get(th, "param"), json_object_get(np, "param"), FLOOR, spec);
    double wft = f32_err(p32, json_object_get(th, "param"), spec);
    for (int k = 0; k < ns; k++) {
        const json_t *ts = json_array_get(th_slots, (size_t)k);
        if (json_is_null(ts))
            continue; /* torch keeps no such state in this configuration */
        wt = fmax(wt, arr_err(ts, json_array_get(np_slots, (size_t)k), FLOOR, spec));
        wft = fmax(wft, f32_err(s32[k], ts, spec));
    }
    double tol = cfg->kind == TL_OPTIM_RMSPROP ? TOL_TORCH_RMSPROP : TOL_TORCH;
    cr_assert(wt <= tol, "%s: PyTorch vs NumPy: error %.3g > %g", spec, wt, tol);
    cr_assert(wft <= TOL_F32, "%s: float32 kernel vs PyTorch: error %.3g > %g", spec, wft, TOL_F32);
    e->torch = fmax(e->torch, wt);
    e->f32_torch = fmax(e->f32_torch, wft);
}

/* Runs every variant under every schedule shape against the references. */
static void run_all(const char *label, const tl_optimizer_config *variants, int nvar)
{
    tl_optimizer_config cfgs[MAX_CASES];
    static char specs[MAX_CASES][512];
    int ncase = 0;
    for (int v = 0; v < nvar; v++) {
        for (int s = 0; s < NSHAPES; s++) {
            cr_assert(ncase < MAX_CASES);
            tl_optimizer_config c = variants[v];
            double lr = c.lr.learning_rate;
            c.lr = shapes[s];
            c.lr.learning_rate = lr;
            cr_assert_eq(tl_optimizer_config_validate(&c), TL_OK, "%s", tl_last_error());
            cfgs[ncase] = c;
            spec_of(&c, specs[ncase], sizeof specs[ncase]);
            ncase++;
        }
    }
    json_t *root = run_script(specs, ncase);
    errs e = {0};
    const json_t *cases = json_object_get(root, "cases");
    for (int i = 0; i < ncase; i++)
        check_case(&cfgs[i], json_array_get(cases, (size_t)i), &e);
    fprintf(stderr,
            "optim_ref %-22s %2d cases: max error: one f32 step %.2e; after %d steps f32 vs NumPy %.2e, "
            "f64 vs NumPy %.2e, lr %.1e; PyTorch (%d cases) vs NumPy %.2e, f32 vs PyTorch %.2e\n",
            label, ncase, e.step, STEPS, e.f32, e.f64, e.lr, e.torch_cases, e.torch,
            e.f32_torch);
    json_decref(root);
}

static tl_optimizer_config make(tl_optimizer_kind kind, double lr)
{
    tl_optimizer_config c;
    tl_optimizer_config_default(kind, &c);
    c.lr.learning_rate = lr;
    return c;
}

Test(optim_ref, gradient_descent)
{
    tl_optimizer_config v[] = {make(TL_OPTIM_SGD, 0.05)};
    run_all("GradientDescent", v, 1);
}

Test(optim_ref, momentum)
{
    tl_optimizer_config v[2] = {make(TL_OPTIM_MOMENTUM, 0.02), make(TL_OPTIM_MOMENTUM, 0.02)};
    v[0].momentum = 0.9;
    v[1].momentum = 0.9;
    v[1].use_nesterov = true;
    run_all("Momentum", v, 2);
}

Test(optim_ref, adagrad)
{
    tl_optimizer_config v[2] = {make(TL_OPTIM_ADAGRAD, 0.1), make(TL_OPTIM_ADAGRAD, 0.5)};
    v[1].initial_accumulator_value = 0.01;
    run_all("Adagrad", v, 2);
}

Test(optim_ref, adam)
{
    /* TF's defaults, then a case where epsilon-hat matters (1e-3 against
     * sqrt(v) of order 0.1-1). */
    tl_optimizer_config v[2] = {make(TL_OPTIM_ADAM, 0.001), make(TL_OPTIM_ADAM, 0.01)};
    v[1].beta1 = 0.8;
    v[1].beta2 = 0.99;
    v[1].epsilon = 1e-3;
    run_all("Adam", v, 2);
}

Test(optim_ref, rmsprop)
{
    tl_optimizer_config v[4];
    for (int i = 0; i < 4; i++)
        v[i] = make(TL_OPTIM_RMSPROP, 0.01);
    v[1].momentum = 0.9;
    v[2].centered = true;
    v[3].centered = true;
    v[3].momentum = 0.5;
    v[3].decay = 0.8;
    run_all("RMSProp", v, 4);
}

Test(optim_ref, rmsprop_large_epsilon)
{
    /* epsilon inside the sqrt, visibly: no PyTorch twin (see the script). */
    tl_optimizer_config v[2] = {make(TL_OPTIM_RMSPROP, 0.01), make(TL_OPTIM_RMSPROP, 0.01)};
    v[0].epsilon = 0.05;
    v[1].epsilon = 0.05;
    v[1].centered = true;
    v[1].momentum = 0.9;
    run_all("RMSProp epsilon 0.05", v, 2);
}
