/* test_model_parallel.c — ModelParallel: the MP-* and PD-4 vectors of
 * distribution.md §14, and allocation-failure unwinding of its constructor
 * and layouts. */
#include "testutil.h"

/* ---- ModelParallel ------------------------------------------------------ */

/* The §14.5 fixture: mesh24 = (2, 4) ["data", "model"] on the 8 devices
 * fx_devs; lm has ".*kernel" = (None, "model") and ".*bias" = ("model",). */
static tl_devices *fx_devs;
static tl_mesh *fx_mesh24;
static tl_layout_map *fx_lm;

static void mp_setup(void)
{
    fx_devs = tu_devices(8, 1, 0);
    fx_mesh24 = tu_mesh2(fx_devs, 2, 4, "data", "model");
    ASSERT_OK(tl_layout_map_create(fx_mesh24, TL_MATCH_FULL, &fx_lm));
    ASSERT_OK(tl_layout_map_set_axes(fx_lm, ".*kernel", (const char *[]){NULL, "model"}, 2));
    ASSERT_OK(tl_layout_map_set_axes(fx_lm, ".*bias", (const char *[]){"model"}, 1));
}

static void mp_teardown(void)
{
    tl_layout_map_destroy(fx_lm);
    tl_mesh_destroy(fx_mesh24);
    tl_devices_destroy(fx_devs);
}

TestSuite(model_parallel, .init = mp_setup, .fini = mp_teardown);

static tl_layout *variable_layout(const tl_distribution *d, const char *path, int rank, const tl_layout *own)
{
    int64_t shape[4] = {16, 8, 4, 4};
    tl_variable_desc v = {path, rank, shape, own};
    tl_layout *l;
    ASSERT_OK(tl_distribution_get_variable_layout(d, &v, &l));
    return l;
}

Test(model_parallel, MP_1_kernel_from_layout_map)
{
    tl_distribution *d = tu_model_parallel(fx_lm, "data", 1, 0);
    cr_assert_eq(tl_distribution_kind_of(d), TL_MODEL_PARALLEL);
    cr_assert_eq(tl_distribution_layout_map(d), fx_lm);
    tl_layout *l = variable_layout(d, "kernel", 2, NULL);
    tu_assert_axes(l, 2, (const char *[]){NULL, "model"});
    cr_assert_eq(tl_layout_mesh(l), fx_mesh24);
    tl_layout_destroy(l);
    char buf[160];
    tl_distribution_repr(d, buf, sizeof buf);
    cr_assert_str_eq(buf, "<ModelParallel device_mesh=<DeviceMesh shape=(2, 4), axis_names=['data', 'model']>>");
    tl_distribution_destroy(d);
}

Test(model_parallel, MP_2_bias_from_layout_map)
{
    tl_distribution *d = tu_model_parallel(fx_lm, "data", 1, 0);
    tl_layout *l = variable_layout(d, "bias", 1, NULL);
    tu_assert_axes(l, 1, (const char *[]){"model"});
    tl_layout_destroy(l);
    tl_distribution_destroy(d);
}

Test(model_parallel, MP_3_unmatched_variable_replicated)
{
    tl_distribution *d = tu_model_parallel(fx_lm, "data", 1, 0);
    tl_layout *l = variable_layout(d, "seed", 1, NULL);
    tu_assert_axes(l, 1, (const char *[]){NULL});
    cr_assert_eq(tl_layout_mesh(l), fx_mesh24);
    tl_layout_destroy(l);
    tl_distribution_destroy(d);
}

Test(model_parallel, MP_4_data_layout)
{
    tl_layout_map *empty;
    ASSERT_OK(tl_layout_map_create(fx_mesh24, TL_MATCH_FULL, &empty));
    tl_distribution *d = tu_model_parallel(empty, "data", 1, 0);
    tl_layout *l;
    ASSERT_OK(tl_distribution_get_data_layout(d, (int64_t[]){4, 2, 2}, 3, &l));
    tu_assert_axes(l, 3, (const char *[]){"data", NULL, NULL});
    cr_assert_eq(tl_layout_mesh(l), fx_mesh24);
    tl_layout_destroy(l);
    tl_distribution_destroy(d);
    tl_layout_map_destroy(empty);
}

Test(model_parallel, MP_5_tensor_layout)
{
    ASSERT_OK(tl_layout_map_set_axes(fx_lm, "/model/layer/tensor", (const char *[]){"data", NULL}, 2));
    tl_distribution *d = tu_model_parallel(fx_lm, "data", 1, 0);
    tl_layout *l;
    ASSERT_OK(tl_distribution_get_tensor_layout(d, "/model/layer/tensor", &l));
    tu_assert_axes(l, 2, (const char *[]){"data", NULL});
    cr_assert_eq(tl_layout_mesh(l), fx_mesh24);
    tl_layout_destroy(l);
    ASSERT_OK(tl_distribution_get_tensor_layout(d, "/model/layer/other_tensor", &l));
    cr_assert_null(l);
    tl_distribution_destroy(d);
}

Test(model_parallel, MP_6_variable_own_layout_wins)
{
    tl_mesh *mx = tu_mesh1(fx_devs, 8, "x");
    tl_layout *own;
    ASSERT_OK(tl_layout_create((const char *[]){"x", NULL}, 2, mx, &own));
    tl_distribution *d = tu_model_parallel(fx_lm, "data", 1, 0);
    tl_layout *l = variable_layout(d, "kernel", 2, own);
    tu_assert_axes(l, 2, (const char *[]){"x", NULL});
    cr_assert_eq(tl_layout_mesh(l), mx);
    tl_layout_destroy(l);
    tl_layout_destroy(own);
    tl_distribution_destroy(d);
    tl_mesh_destroy(mx);
}

Test(model_parallel, MP_7_layout_map_required)
{
    tl_model_parallel_options o;
    tl_model_parallel_options_init(&o);
    tl_distribution *d;
    ASSERT_ERR(tl_model_parallel_create(&o, &d), TL_EINVAL, "You must specify a layout_map argument.");
    cr_assert_null(d);
    ASSERT_ERR(tl_model_parallel_create(NULL, &d), TL_EINVAL, "You must specify a layout_map argument.");
}

/* MP-8 (a dict as layout_map) has no test: layout_map is a `const tl_layout_map *`.
 * MP-9 (positional arguments) has no test: C has no keyword arguments; the
 * options struct names every field. */

Test(model_parallel, MP_10_batch_dim_defaults_to_first_axis)
{
    tl_distribution *d = tu_model_parallel(fx_lm, NULL, 1, 0);
    cr_assert_str_eq(tl_distribution_batch_dim_name(d), "data");
    tl_distribution_destroy(d);
    d = tu_model_parallel(fx_lm, "", 1, 0);
    cr_assert_str_eq(tl_distribution_batch_dim_name(d), "data");
    cr_assert_eq(tl_distribution_mesh(d), fx_mesh24);
    tl_distribution_destroy(d);
}

/* ModelParallel on a fresh mesh (a, b) ["data", "model"] of a*b devices. */
static tl_status mp_on_mesh(int64_t a, int64_t b, int P, tl_distribution **d, tl_mesh **m, tl_layout_map **map)
{
    tl_devices *devs = tu_devices((int)(a * b), 1, 0);
    *m = tu_mesh2(devs, a, b, "data", "model");
    tl_devices_destroy(devs);
    ASSERT_OK(tl_layout_map_create(*m, TL_MATCH_FULL, map));
    tl_model_parallel_options o;
    tl_model_parallel_options_init(&o);
    o.layout_map = *map;
    o.process = (tl_process){P, 0};
    return tl_model_parallel_create(&o, d);
}

Test(model_parallel, MP_11_processes_not_divisible_by_replicas)
{
    tl_distribution *d;
    tl_mesh *m;
    tl_layout_map *map;
    ASSERT_ERR(mp_on_mesh(3, 2, 4, &d, &m, &map), TL_EINVAL,
               "If `num_processes` is greater than `num_model_replicas`, `num_processes` must be divisible by "
               "`num_model_replicas`. Got num_processes=4, num_model_replicas=3.");
    cr_assert_null(d);
    tl_layout_map_destroy(map);
    tl_mesh_destroy(m);
}

Test(model_parallel, MP_12_more_replicas_than_processes)
{
    tl_distribution *d;
    tl_mesh *m;
    tl_layout_map *map;
    ASSERT_OK(mp_on_mesh(4, 2, 2, &d, &m, &map));
    int r;
    ASSERT_OK(tl_distribution_num_model_replicas(d, &r));
    cr_assert_eq(r, 4);
    cr_assert_eq(tl_distribution_num_processes(d), 2);
    tl_distribution_destroy(d);
    tl_layout_map_destroy(map);
    tl_mesh_destroy(m);
}

Test(model_parallel, MP_13_no_3_14_1_regression)
{
    tl_distribution *d;
    tl_mesh *m;
    tl_layout_map *map;
    ASSERT_OK(mp_on_mesh(8, 1, 2, &d, &m, &map));
    int r;
    ASSERT_OK(tl_distribution_num_model_replicas(d, &r));
    cr_assert_eq(r, 8);
    tl_distribution_destroy(d);
    tl_layout_map_destroy(map);
    tl_mesh_destroy(m);
}

Test(model_parallel, MP_14_unknown_batch_dim_surfaces_later)
{
    tl_distribution *d = tu_model_parallel(fx_lm, "nope", 1, 0);
    cr_assert_str_eq(tl_distribution_batch_dim_name(d), "nope");
    int r;
    ASSERT_ERR(tl_distribution_num_model_replicas(d, &r), TL_EINVAL, "'nope' is not in list");
    tl_layout *l;
    ASSERT_ERR(tl_distribution_get_data_layout(d, (int64_t[]){4}, 1, &l), TL_EINVAL,
               "Invalid axis names for Layout");
    tl_distribution_destroy(d);

    /* multi-process construction needs R, so there it is an error at once */
    tl_model_parallel_options o;
    tl_model_parallel_options_init(&o);
    o.layout_map = fx_lm;
    o.batch_dim_name = "nope";
    o.process = (tl_process){2, 0};
    ASSERT_ERR(tl_model_parallel_create(&o, &d), TL_EINVAL, "'nope' is not in list");
}

/* MP-15 (a device_mesh= kwarg, ignored) has no test: the options struct has no
 * device_mesh field, so the mesh is always the LayoutMap's. */

Test(model_parallel, multiple_matches_surface_from_variable_layout)
{
    ASSERT_OK(tl_layout_map_set_axes(fx_lm, "dense.*", (const char *[]){NULL, NULL}, 2));
    tl_distribution *d = tu_model_parallel(fx_lm, NULL, 1, 0);
    tl_variable_desc v = {"dense/kernel", 2, (int64_t[]){4, 4}, NULL};
    tl_layout *l;
    ASSERT_ERR(tl_distribution_get_variable_layout(d, &v, &l), TL_EINVAL,
               "matches multiple layout specification keys: ['.*kernel', 'dense.*']");
    ASSERT_ERR(tl_distribution_get_tensor_layout(d, "dense/kernel", &l), TL_EINVAL, "matches multiple");
    tl_distribution_destroy(d);
}

Test(model_parallel, PD_4_kernel_columns_on_model_axis)
{
    tl_distribution *d = tu_model_parallel(fx_lm, NULL, 1, 0);
    tl_layout *l = variable_layout(d, "dense/kernel", 2, NULL);
    for (int b = 0; b < 2; b++) {
        for (int m = 0; m < 4; m++) {
            int64_t off[2], size[2];
            int dev = tl_mesh_device_at_coords(fx_mesh24, (int64_t[]){b, m});
            ASSERT_OK(tl_layout_block(l, (int64_t[]){16, 8}, 2, tl_mesh_index_of(fx_mesh24, dev), off, size));
            cr_assert_eq(off[0], 0);
            cr_assert_eq(size[0], 16);
            cr_assert_eq(off[1], 2 * m);
            cr_assert_eq(size[1], 2);
        }
    }
    tl_layout_destroy(l);
    tl_distribution_destroy(d);
}

/* ---- allocation failures ------------------------------------------------ */

/* ModelParallel over the layout map ctx, process 1 of 2. */
static tl_status mp_create(void *ctx)
{
    tl_model_parallel_options o;
    tl_model_parallel_options_init(&o);
    o.layout_map = ctx;
    o.batch_dim_name = "data";
    o.process = (tl_process){2, 1};
    tl_distribution *d;
    tl_status st = tl_model_parallel_create(&o, &d);
    if (st == TL_OK)
        tl_distribution_destroy(d);
    return st;
}

/* The layout of a (16, 8) "dense/kernel" under the distribution ctx. */
static tl_status mp_variable_layout(void *ctx)
{
    tl_variable_desc v = {"dense/kernel", 2, (int64_t[]){16, 8}, NULL};
    tl_layout *l;
    tl_status st = tl_distribution_get_variable_layout(ctx, &v, &l);
    if (st == TL_OK)
        tl_layout_destroy(l);
    return st;
}

/* The layout of (8, 3) data under the distribution ctx. */
static tl_status mp_data_layout(void *ctx)
{
    tl_layout *l;
    tl_status st = tl_distribution_get_data_layout(ctx, (int64_t[]){8, 3}, 2, &l);
    if (st == TL_OK)
        tl_layout_destroy(l);
    return st;
}

Test(model_parallel, oom_create_and_layouts_unwind)
{
    cr_assert_eq(tu_oom_sweep(mp_create, fx_lm, "ModelParallel create"), 2);
    tl_distribution *d = tu_model_parallel(fx_lm, NULL, 1, 0);
    cr_assert_eq(tu_oom_sweep(mp_variable_layout, d, "ModelParallel variable layout"), 3);
    cr_assert_eq(tu_oom_sweep(mp_data_layout, d, "ModelParallel data layout"), 4);
    tl_distribution_destroy(d);
}
