/* test_distribution.c — initialize, the current distribution and its scope,
 * data_shard_id and DataParallel: the IN-*, DS-*, ID-* and DP-* vectors of
 * distribution.md §14, and allocation-failure unwinding of the DataParallel
 * constructor. ModelParallel is in test_model_parallel.c. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "testutil.h"

static tl_distribution *data_parallel(const tl_mesh *mesh, int P, int pid)
{
    tl_data_parallel_options o;
    tl_data_parallel_options_init(&o);
    o.device_mesh = mesh;
    o.process = (tl_process){P, pid};
    tl_distribution *d;
    ASSERT_OK(tl_data_parallel_create(&o, &d));
    return d;
}

/* ---- initialize --------------------------------------------------------- */

#define ADDRS "10.0.0.1:1234,10.0.0.2:2345"

Test(initialize, IN_1_explicit_arguments)
{
    tl_init_request r;
    ASSERT_OK(tl_initialize_resolve(ADDRS, 2, 0, NULL, &r));
    cr_assert_str_eq(r.job_addresses, ADDRS);
    cr_assert_eq(r.num_processes, 2);
    cr_assert_eq(r.process_id, 0);
    tl_process p;
    char coord[64];
    ASSERT_OK(tl_initialize(ADDRS, 2, 0, NULL, &p, coord, sizeof coord));
    cr_assert_str_eq(coord, "10.0.0.1:1234");
    cr_assert_eq(p.num_processes, 2);
    cr_assert_eq(p.process_id, 0);
}

Test(initialize, IN_2_environment_fallback)
{
    const char *env[] = {"PATH=/bin", "KERAS_DISTRIBUTION_JOB_ADDRESSES=" ADDRS,
                         "KERAS_DISTRIBUTION_NUM_PROCESSES=2", "KERAS_DISTRIBUTION_PROCESS_ID=0", NULL};
    tl_init_request r;
    ASSERT_OK(tl_initialize_resolve(NULL, -1, -1, env, &r));
    cr_assert_str_eq(r.job_addresses, ADDRS);
    cr_assert_eq(r.num_processes, 2);
    cr_assert_eq(r.process_id, 0);
    tl_process p;
    char coord[64];
    ASSERT_OK(tl_initialize(NULL, -1, -1, env, &p, coord, sizeof coord));
    cr_assert_str_eq(coord, "10.0.0.1:1234");
    cr_assert_eq(p.num_processes, 2);
}

Test(initialize, IN_3_nothing_given)
{
    const char *env[] = {"HOME=/root", "KERAS_DISTRIBUTION_NUM_PROCESSESX=3", NULL};
    tl_init_request r;
    ASSERT_OK(tl_initialize_resolve(NULL, -1, -1, env, &r));
    cr_assert_null(r.job_addresses);
    cr_assert_eq(r.num_processes, -1);
    cr_assert_eq(r.process_id, -1);
    tl_process p;
    char coord[8];
    ASSERT_OK(tl_initialize(NULL, -1, -1, NULL, &p, coord, sizeof coord));
    cr_assert_str_eq(coord, "");
    cr_assert_eq(p.num_processes, 1);
    cr_assert_eq(p.process_id, 0);
}

Test(initialize, IN_4_job_count_mismatch)
{
    tl_process p;
    ASSERT_ERR(tl_initialize(ADDRS, 3, 0, NULL, &p, NULL, 0), TL_EINVAL,
               "The provided job_addresses ['10.0.0.1:1234', '10.0.0.2:2345'] has 2 jobs, but num_processes is 3");
}

Test(initialize, IN_5_single_address_not_split)
{
    tl_process p;
    char coord[64];
    ASSERT_OK(tl_initialize("10.0.0.1:1234", 2, 0, NULL, &p, coord, sizeof coord));
    cr_assert_str_eq(coord, "10.0.0.1:1234");
    cr_assert_eq(p.num_processes, 2);
}

Test(initialize, IN_6_explicit_wins_over_environment)
{
    const char *env[] = {"KERAS_DISTRIBUTION_NUM_PROCESSES=4", NULL};
    tl_process p;
    ASSERT_OK(tl_initialize(NULL, 2, -1, env, &p, NULL, 0));
    cr_assert_eq(p.num_processes, 2);
    cr_assert_eq(p.process_id, 0);
}

Test(initialize, IN_7_environment_not_an_int)
{
    const char *env[] = {"KERAS_DISTRIBUTION_PROCESS_ID=x", NULL};
    tl_process p;
    ASSERT_ERR(tl_initialize(NULL, -1, -1, env, &p, NULL, 0), TL_EINVAL,
               "invalid literal for int() with base 10: 'x' (KERAS_DISTRIBUTION_PROCESS_ID)");
    const char *env2[] = {"KERAS_DISTRIBUTION_NUM_PROCESSES=", NULL};
    ASSERT_ERR(tl_initialize(NULL, -1, -1, env2, &p, NULL, 0), TL_EINVAL, "invalid literal for int()");
    const char *env3[] = {"KERAS_DISTRIBUTION_NUM_PROCESSES=99999999999", NULL};
    ASSERT_ERR(tl_initialize(NULL, -1, -1, env3, &p, NULL, 0), TL_EINVAL, "out of range");
}

Test(initialize, range_and_buffer_checks)
{
    tl_process p;
    ASSERT_ERR(tl_initialize(NULL, 2, 2, NULL, &p, NULL, 0), TL_EINVAL, "process_id must be in [0, 2)");
    ASSERT_ERR(tl_initialize(NULL, 0, -1, NULL, &p, NULL, 0), TL_EINVAL, "num_processes must be >= 1");
    ASSERT_ERR(tl_initialize(NULL, -5, -1, NULL, &p, NULL, 0), TL_EINVAL, "num_processes must be -1 (None)");
    char small[4];
    ASSERT_ERR(tl_initialize(ADDRS, 2, 1, NULL, &p, small, sizeof small), TL_EINVAL, "needs 14 bytes");
    const char *env[] = {"KERAS_DISTRIBUTION_JOB_ADDRESSES=", NULL};
    char coord[8];
    ASSERT_OK(tl_initialize(NULL, -1, -1, env, &p, coord, sizeof coord));
    cr_assert_str_eq(coord, "");
}

/* The fixture of the distribution and data_parallel suites: 8 devices and
 * the mesh (8,) ["data"] on them. */
static tl_devices *fx_devs;
static tl_mesh *fx_mesh8;

static void dp_setup(void)
{
    fx_devs = tu_devices(8, 1, 0);
    fx_mesh8 = tu_mesh1(fx_devs, 8, "data");
}

static void dp_teardown(void)
{
    tl_mesh_destroy(fx_mesh8);
    tl_devices_destroy(fx_devs);
}

/* ---- the current distribution ------------------------------------------- */

TestSuite(distribution, .init = dp_setup, .fini = dp_teardown);

Test(distribution, DS_1_none_before_set)
{
    cr_assert_null(tl_distribution_current());
}

Test(distribution, DS_2_nested_scopes)
{
    tl_distribution *d1 = data_parallel(fx_mesh8, 1, 0), *d2 = data_parallel(fx_mesh8, 1, 0);
    tl_distribution_scope outer, inner;
    tl_distribution_scope_enter(d1, &outer);
    cr_assert_eq(tl_distribution_current(), d1);
    tl_distribution_scope_enter(d2, &inner);
    cr_assert_eq(tl_distribution_current(), d2);
    tl_distribution_scope_exit(&inner);
    cr_assert_eq(tl_distribution_current(), d1);
    tl_distribution_scope_exit(&outer);
    cr_assert_null(tl_distribution_current());

    tl_distribution_set(d2);
    cr_assert_eq(tl_distribution_current(), d2);
    tl_distribution_destroy(d2); /* destroying the current one clears the slot */
    cr_assert_null(tl_distribution_current());
    tl_distribution_destroy(d1);
}

static void *read_current(void *out)
{
    *(tl_distribution **)out = tl_distribution_current();
    return NULL;
}

Test(distribution, current_is_per_thread)
{
    tl_distribution *d = data_parallel(fx_mesh8, 1, 0);
    tl_distribution_set(d);
    tl_distribution *seen = d;
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, read_current, &seen), 0);
    pthread_join(t, NULL);
    cr_assert_null(seen, "another thread has its own (empty) slot");
    cr_assert_eq(tl_distribution_current(), d);
    tl_distribution_set(NULL);
    tl_distribution_destroy(d);
}

/* A body that fails inside the scope and leaves through its error path, as a
 * Python exception leaves a `with` block. */
static tl_status failing_body(tl_distribution *d)
{
    tl_distribution_scope sc;
    tl_distribution_scope_enter(d, &sc);
    tl_layout *l = NULL;
    tl_status st = tl_distribution_get_data_layout(tl_distribution_current(), NULL, 0, &l);
    if (st != TL_OK)
        goto out;
    tl_layout_destroy(l);
out:
    tl_distribution_scope_exit(&sc);
    return st;
}

Test(distribution, DS_3_scope_restores_on_error)
{
    tl_distribution *d0 = data_parallel(fx_mesh8, 1, 0), *d1 = data_parallel(fx_mesh8, 1, 0);
    tl_distribution_set(d0);
    ASSERT_ERR(failing_body(d1), TL_EINVAL, "rank");
    cr_assert_eq(tl_distribution_current(), d0);
    tl_distribution_set(NULL);
    tl_distribution_destroy(d0);
    tl_distribution_destroy(d1);
}

Test(distribution, DS_4_base_class_is_abstract)
{
    tl_distribution *d;
    ASSERT_OK(tl_distribution_create(fx_mesh8, NULL, (tl_process){1, 0}, &d));
    cr_assert_eq(tl_distribution_kind_of(d), TL_DISTRIBUTION_BASE);
    tl_layout *l;
    ASSERT_ERR(tl_distribution_get_data_layout(d, (int64_t[]){2}, 1, &l), TL_ENOTIMPL, "NotImplementedError");
    tl_variable_desc v = {"kernel", 1, (int64_t[]){2}, NULL};
    ASSERT_ERR(tl_distribution_get_variable_layout(d, &v, &l), TL_ENOTIMPL, "get_variable_layout");
    ASSERT_ERR(tl_distribution_get_tensor_layout(d, "x", &l), TL_ENOTIMPL, "get_tensor_layout");
    int r;
    ASSERT_ERR(tl_distribution_num_model_replicas(d, &r), TL_ENOTIMPL, "num_model_replicas");
    char buf[128];
    tl_distribution_repr(d, buf, sizeof buf);
    cr_assert_str_eq(buf, "<Distribution device_mesh=<DeviceMesh shape=(8,), axis_names=['data']>>");
    cr_assert_null(tl_distribution_batch_dim_name(d));
    tl_distribution_destroy(d);
    tl_distribution_destroy(NULL);
}

/* ---- data_shard_id ------------------------------------------------------ */

/* DataParallel over n devices with P processes: R = n. */
static void assert_dp_shard_ids(int n, int P, const int *want)
{
    tl_devices *devs = tu_devices(n, 1, 0);
    tl_mesh *m = tu_mesh1(devs, n, "batch");
    for (int pid = 0; pid < P; pid++) {
        tl_distribution *d = data_parallel(m, P, pid);
        int id;
        ASSERT_OK(tl_distribution_data_shard_id(d, &id));
        cr_assert_eq(id, want[pid], "R=%d P=%d pid=%d: %d", n, P, pid, id);
        tl_distribution_destroy(d);
    }
    tl_mesh_destroy(m);
    tl_devices_destroy(devs);
}

/* ModelParallel on mesh (R, 8/R) with P processes. */
static void assert_mp_shard_ids(int R, int P, bool legacy, const int *want)
{
    tl_devices *devs = tu_devices(8, 1, 0);
    tl_mesh *m = tu_mesh2(devs, R, 8 / R, "data", "model");
    tl_layout_map *map;
    ASSERT_OK(tl_layout_map_create(m, TL_MATCH_FULL, &map));
    for (int pid = 0; pid < P; pid++) {
        tl_model_parallel_options o;
        tl_model_parallel_options_init(&o);
        o.layout_map = map;
        o.process = (tl_process){P, pid};
        o.legacy_shard_id = legacy;
        tl_distribution *d;
        ASSERT_OK(tl_model_parallel_create(&o, &d));
        int id;
        ASSERT_OK(tl_distribution_data_shard_id(d, &id));
        cr_assert_eq(id, want[pid], "R=%d P=%d pid=%d: %d", R, P, pid, id);
        tl_distribution_destroy(d);
    }
    tl_layout_map_destroy(map);
    tl_mesh_destroy(m);
    tl_devices_destroy(devs);
}

Test(distribution, ID_1_more_replicas_than_processes)
{
    assert_dp_shard_ids(8, 4, (int[]){0, 1, 2, 3});
    assert_mp_shard_ids(8, 4, false, (int[]){0, 1, 2, 3});
}

Test(distribution, ID_2_replica_groups)
{
    assert_mp_shard_ids(2, 4, false, (int[]){0, 0, 1, 1});
}

Test(distribution, ID_3_equal)
{
    assert_dp_shard_ids(4, 4, (int[]){0, 1, 2, 3});
    assert_mp_shard_ids(4, 4, false, (int[]){0, 1, 2, 3});
}

Test(distribution, ID_4_legacy_modulo_shard_id)
{
    assert_mp_shard_ids(2, 4, true, (int[]){0, 1, 0, 1});
}

Test(distribution, ID_5_num_data_shards)
{
    tl_mesh *m24 = tu_mesh2(fx_devs, 2, 4, "data", "model");
    tl_layout_map *map;
    ASSERT_OK(tl_layout_map_create(m24, TL_MATCH_FULL, &map));
    tl_distribution *mp = tu_model_parallel(map, NULL, 4, 3);
    int s;
    ASSERT_OK(tl_distribution_num_data_shards(mp, &s));
    cr_assert_eq(s, 2);
    tl_mesh *m8 = tu_mesh1(fx_devs, 8, "batch");
    tl_distribution *dp = data_parallel(m8, 4, 1);
    ASSERT_OK(tl_distribution_num_data_shards(dp, &s));
    cr_assert_eq(s, 4);
    tl_distribution_destroy(mp);
    tl_distribution_destroy(dp);
    tl_layout_map_destroy(map);
    tl_mesh_destroy(m24);
    tl_mesh_destroy(m8);
}

/* ---- DataParallel ------------------------------------------------------- */

TestSuite(data_parallel, .init = dp_setup, .fini = dp_teardown);

Test(data_parallel, DP_1_from_mesh)
{
    tl_distribution *d = data_parallel(fx_mesh8, 1, 0);
    cr_assert_eq(tl_distribution_kind_of(d), TL_DATA_PARALLEL);
    cr_assert_eq(tl_distribution_mesh(d), fx_mesh8);
    cr_assert_str_eq(tl_distribution_batch_dim_name(d), "data");
    cr_assert(!tl_distribution_is_multi_process(d));
    cr_assert_eq(tl_distribution_process_id(d), 0);
    cr_assert_eq(tl_distribution_num_processes(d), 1);
    cr_assert(tl_distribution_auto_shard_dataset(d));
    cr_assert_null(tl_distribution_layout_map(d));
    char buf[128];
    int n = tl_distribution_repr(d, buf, sizeof buf);
    cr_assert_str_eq(buf, "<DataParallel device_mesh=<DeviceMesh shape=(8,), axis_names=['data']>>");
    cr_assert_eq(n, (int)strlen(buf));
    tl_distribution_set_auto_shard_dataset(d, false);
    cr_assert(!tl_distribution_auto_shard_dataset(d));
    tl_distribution_destroy(d);
}

static void assert_batch_mesh_of_8(const tl_distribution *d)
{
    const tl_mesh *m = tl_distribution_mesh(d);
    cr_assert_eq(tl_mesh_ndim(m), 1);
    cr_assert_eq(tl_mesh_shape(m)[0], 8);
    cr_assert_str_eq(tl_mesh_axis_name(m, 0), "batch");
    cr_assert_str_eq(tl_distribution_batch_dim_name(d), "batch");
    for (int i = 0; i < 8; i++)
        cr_assert_eq(tl_mesh_device_at(m, i), i);
}

Test(data_parallel, DP_2_from_devices)
{
    tl_data_parallel_options o;
    tl_data_parallel_options_init(&o);
    o.devices = tu_dev8;
    o.ndevices = 8;
    tl_distribution *d;
    ASSERT_OK(tl_data_parallel_create(&o, &d));
    assert_batch_mesh_of_8(d);
    tl_distribution_destroy(d);
}

Test(data_parallel, DP_3_discovers_devices)
{
    tl_data_parallel_options o;
    tl_data_parallel_options_init(&o);
    o.discover = fx_devs;
    tl_distribution *d;
    ASSERT_OK(tl_data_parallel_create(&o, &d));
    assert_batch_mesh_of_8(d);
    tl_distribution_destroy(d);
}

Test(data_parallel, DP_4_mesh_wins_over_devices)
{
    tl_data_parallel_options o;
    tl_data_parallel_options_init(&o);
    o.device_mesh = fx_mesh8;
    o.devices = tu_dev4;
    o.ndevices = 4;
    tl_distribution *d;
    ASSERT_OK(tl_data_parallel_create(&o, &d));
    cr_assert_eq(tl_distribution_mesh(d), fx_mesh8);
    tl_distribution_destroy(d);
}

Test(data_parallel, DP_5_empty_devices_fall_back_to_discovery)
{
    tl_data_parallel_options o;
    tl_data_parallel_options_init(&o);
    o.devices = tu_dev8;
    o.ndevices = 0;
    o.discover = fx_devs;
    tl_distribution *d;
    ASSERT_OK(tl_data_parallel_create(&o, &d));
    assert_batch_mesh_of_8(d);
    tl_distribution_destroy(d);
}

/* DP-6 (a string as device_mesh) has no test: device_mesh is a `const tl_mesh *`. */

static int warnings;
static char last_warning[512];

static void capture(tl_log_level level, const char *msg, void *ud)
{
    (void)ud;
    if (level == TL_LOG_WARN) {
        warnings++;
        snprintf(last_warning, sizeof last_warning, "%s", msg);
    }
}

Test(data_parallel, DP_7_multi_axis_mesh_warns)
{
    tl_mesh *m = tu_mesh2(fx_devs, 4, 2, "batch", "model");
    tl_set_log_handler(capture, NULL);
    tl_distribution *d = data_parallel(m, 1, 0);
    tl_set_log_handler(NULL, NULL);
    cr_assert_eq(warnings, 1);
    cr_assert_str_eq(last_warning, "Expect the input mesh to be 1D, but received mesh.devices.ndim=2. The first "
                                   "axis will be used for data-parallel sharding.");
    cr_assert_str_eq(tl_distribution_batch_dim_name(d), "batch");
    int r;
    ASSERT_OK(tl_distribution_num_model_replicas(d, &r));
    cr_assert_eq(r, 8);
    tl_distribution_destroy(d);

    warnings = 0;
    tl_set_log_handler(capture, NULL);
    d = data_parallel(fx_mesh8, 1, 0);
    tl_set_log_handler(NULL, NULL);
    cr_assert_eq(warnings, 0);
    tl_distribution_destroy(d);
    tl_mesh_destroy(m);
}

Test(data_parallel, DP_8_two_dimensional_devices)
{
    tl_data_parallel_options o;
    tl_data_parallel_options_init(&o);
    o.devices = tu_dev8;
    o.ndevices = 8;
    o.devices_shape = (int64_t[]){2, 4};
    o.devices_ndim = 2;
    tl_distribution *d;
    ASSERT_ERR(tl_data_parallel_create(&o, &d), TL_EINVAL, "Shape and axis_names should have same size");
    cr_assert_null(d);
    o.devices_shape = (int64_t[]){2, 3};
    ASSERT_ERR(tl_data_parallel_create(&o, &d), TL_EINVAL, "devices_shape=(2, 3) does not hold the 8 devices");
}

/* DP-8b (a NumPy array of devices) has no test: C has no truthiness of an
 * array; any int array is accepted, as the spec recommends. */

Test(data_parallel, DP_9_data_layout)
{
    tl_distribution *d = data_parallel(fx_mesh8, 1, 0);
    tl_layout *l;
    ASSERT_OK(tl_distribution_get_data_layout(d, (int64_t[]){4, 2, 2}, 3, &l));
    tu_assert_axes(l, 3, (const char *[]){"data", NULL, NULL});
    cr_assert_eq(tl_layout_mesh(l), fx_mesh8);
    tl_layout_destroy(l);
    tl_distribution_destroy(d);
}

Test(data_parallel, DP_10_variable_replicated)
{
    tl_distribution *d = data_parallel(fx_mesh8, 1, 0);
    tl_layout *l;
    tl_variable_desc v = {"dense/bias", 1, (int64_t[]){3}, NULL};
    ASSERT_OK(tl_distribution_get_variable_layout(d, &v, &l));
    tu_assert_axes(l, 1, (const char *[]){NULL});
    cr_assert_eq(tl_layout_mesh(l), fx_mesh8);
    tl_layout_destroy(l);
    tl_variable_desc scalar = {"step", 0, NULL, NULL};
    ASSERT_OK(tl_distribution_get_variable_layout(d, &scalar, &l));
    cr_assert_eq(tl_layout_rank(l), 0);
    tl_layout_destroy(l);
    tl_distribution_destroy(d);
}

Test(data_parallel, DP_11_variable_own_layout_wins)
{
    tl_mesh *mx = tu_mesh1(fx_devs, 8, "x");
    tl_layout *own;
    ASSERT_OK(tl_layout_create((const char *[]){"x"}, 1, mx, &own));
    tl_distribution *d = data_parallel(fx_mesh8, 1, 0);
    tl_layout *l;
    tl_variable_desc v = {"v", 1, (int64_t[]){8}, own};
    ASSERT_OK(tl_distribution_get_variable_layout(d, &v, &l));
    cr_assert_neq(l, own, "the result is a copy");
    tu_assert_axes(l, 1, (const char *[]){"x"});
    cr_assert_eq(tl_layout_mesh(l), mx);
    tl_layout_destroy(l);
    tl_layout_destroy(own);
    tl_distribution_destroy(d);
    tl_mesh_destroy(mx);
}

Test(data_parallel, DP_12_no_tensor_layout)
{
    tl_distribution *d = data_parallel(fx_mesh8, 1, 0);
    tl_layout *l = (tl_layout *)1;
    ASSERT_OK(tl_distribution_get_tensor_layout(d, "path/to/tensor", &l));
    cr_assert_null(l);
    tl_distribution_destroy(d);
}

Test(data_parallel, DP_13_two_processes)
{
    tl_distribution *d = data_parallel(fx_mesh8, 2, 1);
    int r;
    ASSERT_OK(tl_distribution_num_model_replicas(d, &r));
    cr_assert_eq(r, 8);
    cr_assert_eq(tl_distribution_num_processes(d), 2);
    cr_assert_eq(tl_distribution_process_id(d), 1);
    cr_assert(tl_distribution_is_multi_process(d));
    tl_distribution_destroy(d);
}

Test(data_parallel, DP_14_scalar_data_rejected)
{
    tl_distribution *d = data_parallel(fx_mesh8, 1, 0);
    tl_layout *l;
    ASSERT_ERR(tl_distribution_get_data_layout(d, NULL, 0, &l), TL_EINVAL,
               "data_shape=() has no batch dimension");
    cr_assert_null(l);
    tl_distribution_destroy(d);
}

Test(data_parallel, option_errors)
{
    tl_distribution *d;
    ASSERT_ERR(tl_data_parallel_create(NULL, &d), TL_EINVAL, "options are NULL");
    tl_data_parallel_options o;
    tl_data_parallel_options_init(&o);
    ASSERT_ERR(tl_data_parallel_create(&o, &d), TL_EINVAL, "give a device_mesh, devices, or a device list");
    o.devices = tu_dev8;
    o.ndevices = 8;
    o.process = (tl_process){2, 2};
    ASSERT_ERR(tl_data_parallel_create(&o, &d), TL_EINVAL, "num_processes=2, process_id=2");
    o.process = (tl_process){0, 0};
    ASSERT_ERR(tl_data_parallel_create(&o, &d), TL_EINVAL, "num_processes must be >= 1");
    o.process = (tl_process){1, 0};
    o.ndevices = -1;
    ASSERT_ERR(tl_data_parallel_create(&o, &d), TL_EINVAL, "ndevices must be >= 0");
}

/* ---- allocation failures ------------------------------------------------ */

/* DataParallel over the devices discovered in ctx: NULL out on failure, the
 * (8,) "batch" mesh on success. */
static tl_status dp_create_discovering(void *ctx)
{
    tl_data_parallel_options o;
    tl_data_parallel_options_init(&o);
    o.discover = ctx;
    tl_distribution *d;
    tl_status st = tl_data_parallel_create(&o, &d);
    if (st != TL_OK) {
        cr_assert_null(d);
        return st;
    }
    assert_batch_mesh_of_8(d);
    tl_distribution_destroy(d);
    return st;
}

static tl_status dp_create_from_ids(void *ctx)
{
    (void)ctx;
    tl_data_parallel_options o;
    tl_data_parallel_options_init(&o);
    o.devices = tu_dev8;
    o.ndevices = 8;
    tl_distribution *d;
    tl_status st = tl_data_parallel_create(&o, &d);
    if (st == TL_OK)
        tl_distribution_destroy(d);
    return st;
}

Test(data_parallel, oom_create_unwinds)
{
    cr_assert_gt(tu_oom_sweep(dp_create_discovering, fx_devs, "DataParallel from discovered devices"), 5);
    cr_assert_gt(tu_oom_sweep(dp_create_from_ids, NULL, "DataParallel from device ids"), 5);
}
