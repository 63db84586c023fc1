/* test_mesh.c — DeviceMesh, TensorLayout and per-device placement: the
 * DM-*, TL-*, LD-* and PD-1/3/5 vectors of distribution.md §14, tpuloop's
 * extra checks, and allocation-failure unwinding. */
#include <stdio.h>
#include <string.h>

#include "testutil.h"

/* ---- list_devices ------------------------------------------------------- */

Test(mesh, LD_1_list_devices_cpu)
{
    tl_devices *devs = tu_devices(8, 1, 0);
    const char *types[] = {NULL, "cpu"};
    for (int t = 0; t < 2; t++) {
        int *ids, n;
        ASSERT_OK(tl_list_devices(devs, types[t], &ids, &n));
        cr_assert_eq(n, 8);
        for (int i = 0; i < n; i++) {
            char want[16];
            snprintf(want, sizeof want, "cpu:%d", i);
            cr_assert_eq(ids[i], i);
            cr_assert_str_eq(tl_devices_get(devs, ids[i])->name, want);
        }
        tl_free_ids(ids);
    }
    int count;
    ASSERT_OK(tl_get_device_count(devs, NULL, &count));
    cr_assert_eq(count, 8);
    tl_devices_destroy(devs);
}

Test(mesh, LD_2_global_devices_of_four_processes)
{
    tl_devices *devs = tu_devices(2, 4, 1);
    int *ids, n;
    ASSERT_OK(tl_list_devices(devs, NULL, &ids, &n));
    cr_assert_eq(n, 8);
    for (int i = 0; i < n; i++) {
        int id;
        ASSERT_OK(tl_device_parse(devs, tl_devices_get(devs, ids[i])->name, &id));
        cr_assert_eq(id, i);
        cr_assert_eq(tl_devices_get(devs, i)->host, i / 2);
    }
    tl_free_ids(ids);
    tl_devices_destroy(devs);
}

/* ---- DeviceMesh --------------------------------------------------------- */

Test(mesh, DM_1_shape_and_devices)
{
    const char *names[] = {"batch", "model"};
    tl_mesh *m;
    ASSERT_OK(tl_mesh_create(NULL, (int64_t[]){4, 2}, 2, names, 2, tu_dev8, 8, &m));
    cr_assert_eq(tl_mesh_ndim(m), 2);
    cr_assert_eq(tl_mesh_shape(m)[0], 4);
    cr_assert_eq(tl_mesh_shape(m)[1], 2);
    cr_assert_str_eq(tl_mesh_axis_name(m, 0), "batch");
    cr_assert_str_eq(tl_mesh_axis_name(m, 1), "model");
    cr_assert_eq(tl_mesh_device_count(m), 8);
    cr_assert_eq(tl_mesh_device_at_coords(m, (int64_t[]){1, 0}), 2);
    cr_assert_eq(tl_mesh_device_at_coords(m, (int64_t[]){3, 1}), 7);
    cr_assert_eq(tl_mesh_device_at_coords(m, (int64_t[]){4, 0}), -1);
    cr_assert_eq(tl_mesh_device_at(m, 5), 5);
    cr_assert_eq(tl_mesh_device_at(m, 8), -1);
    cr_assert_eq(tl_mesh_axis_index(m, "model"), 1);
    cr_assert_eq(tl_mesh_axis_index(m, "data"), -1);
    cr_assert_eq(tl_mesh_axis_size(m, 1), 2);
    cr_assert_eq(tl_mesh_axis_size(m, 2), 0);
    cr_assert_null(tl_mesh_axis_name(m, 2));
    tl_mesh_destroy(m);
}

Test(mesh, DM_2_empty_axis_names)
{
    tl_mesh *m;
    ASSERT_ERR(tl_mesh_create(NULL, (int64_t[]){4}, 1, NULL, 0, tu_dev4, 4, &m), TL_EINVAL,
               "Shape and axis_names cannot be empty");
    cr_assert_null(m);
}

Test(mesh, DM_3_empty_shape)
{
    tl_mesh *m;
    const char *names[] = {"x"};
    ASSERT_ERR(tl_mesh_create(NULL, NULL, 0, names, 1, tu_dev4, 4, &m), TL_EINVAL,
               "Shape and axis_names cannot be empty. Received: shape=(), axis_names=['x']");
}

Test(mesh, DM_4_size_mismatch)
{
    tl_mesh *m;
    const char *names[] = {"batch"};
    ASSERT_ERR(tl_mesh_create(NULL, (int64_t[]){4, 2}, 2, names, 1, tu_dev4, 4, &m), TL_EINVAL,
               "Shape and axis_names should have same size. Received: shape=(4, 2), axis_names=['batch']");
}

Test(mesh, DM_5_device_count_mismatch)
{
    tl_mesh *m;
    const char *names[] = {"batch", "model"};
    ASSERT_ERR(tl_mesh_create(NULL, (int64_t[]){4, 2}, 2, names, 2, tu_dev4, 4, &m), TL_EINVAL,
               "Shape does not match the number of devices. Received: shape=(4, 2); devices.shape=(4,)");
}

Test(mesh, DM_6_devices_default_to_list_devices)
{
    tl_devices *devs = tu_devices(8, 1, 0);
    const char *names[] = {"data"};
    tl_mesh *m;
    ASSERT_OK(tl_mesh_create(devs, (int64_t[]){8}, 1, names, 1, NULL, 0, &m));
    for (int i = 0; i < 8; i++)
        cr_assert_eq(tl_mesh_device_at(m, i), i);
    tl_mesh_destroy(m);
    tl_devices_destroy(devs);
}

Test(mesh, DM_7_repr)
{
    tl_devices *devs = tu_devices(8, 1, 0);
    tl_mesh *m = tu_mesh2(devs, 4, 2, "batch", "model");
    char buf[128];
    int n = tl_mesh_repr(m, buf, sizeof buf);
    const char *want = "<DeviceMesh shape=(4, 2), axis_names=['batch', 'model']>";
    cr_assert_str_eq(buf, want);
    cr_assert_eq(n, (int)strlen(want));
    char small[8];
    cr_assert_eq(tl_mesh_repr(m, small, sizeof small), (int)strlen(want));
    cr_assert_str_eq(small, "<Device");
    cr_assert_eq(tl_mesh_repr(m, NULL, 0), (int)strlen(want));
    tl_mesh_destroy(m);

    const char *one[] = {"data"};
    ASSERT_OK(tl_mesh_create(devs, (int64_t[]){8}, 1, one, 1, NULL, 0, &m));
    tl_mesh_repr(m, buf, sizeof buf);
    cr_assert_str_eq(buf, "<DeviceMesh shape=(8,), axis_names=['data']>");
    tl_mesh_destroy(m);
    tl_devices_destroy(devs);
}

Test(mesh, rejects_duplicate_axis_names)
{
    const char *names[] = {"x", "x"};
    tl_mesh *m;
    ASSERT_ERR(tl_mesh_create(NULL, (int64_t[]){4, 2}, 2, names, 2, tu_dev8, 8, &m), TL_EINVAL,
               "'x' appears twice in axis_names=['x', 'x']");
}

Test(mesh, rejects_zero_and_negative_axis_sizes)
{
    const char *names[] = {"data"};
    tl_mesh *m;
    ASSERT_ERR(tl_mesh_create(NULL, (int64_t[]){0}, 1, names, 1, tu_dev8, 0, &m), TL_EINVAL,
               "axis sizes must be >= 1: shape=(0,) gives axis 'data' size 0");
    const char *two[] = {"a", "b"};
    ASSERT_ERR(tl_mesh_create(NULL, (int64_t[]){-4, -2}, 2, two, 2, tu_dev8, 8, &m), TL_EINVAL,
               "axis sizes must be >= 1");
}

Test(mesh, rejects_missing_axis_name)
{
    const char *names[] = {"data", ""};
    tl_mesh *m;
    ASSERT_ERR(tl_mesh_create(NULL, (int64_t[]){4, 2}, 2, names, 2, tu_dev8, 8, &m), TL_EINVAL,
               "axis names must be non-empty strings");
    const char *nul[] = {NULL};
    ASSERT_ERR(tl_mesh_create(NULL, (int64_t[]){8}, 1, nul, 1, tu_dev8, 8, &m), TL_EINVAL,
               "axis names must be non-empty strings");
}

Test(mesh, rejects_unknown_and_repeated_devices)
{
    tl_devices *devs = tu_devices(4, 1, 0);
    const char *names[] = {"data"};
    tl_mesh *m;
    ASSERT_ERR(tl_mesh_create(devs, (int64_t[]){4}, 1, names, 1, (int[]){0, 1, 2, 9}, 4, &m), TL_EINVAL,
               "Device not found: cpu:9");
    ASSERT_ERR(tl_mesh_create(devs, (int64_t[]){4}, 1, names, 1, (int[]){0, 1, 1, 3}, 4, &m), TL_EINVAL,
               "device cpu:1 appears more than once");
    ASSERT_ERR(tl_mesh_create(NULL, (int64_t[]){2}, 1, names, 1, (int[]){0, -1}, 2, &m), TL_EINVAL,
               "Device not found: cpu:-1");
    ASSERT_ERR(tl_mesh_create(NULL, (int64_t[]){2}, 1, names, 1, NULL, 0, &m), TL_EINVAL, "no devices given");
    tl_devices_destroy(devs);
}

Test(mesh, custom_device_order_and_locate)
{
    const char *names[] = {"batch", "model"};
    tl_mesh *m;
    ASSERT_OK(tl_mesh_create(NULL, (int64_t[]){2, 2}, 2, names, 2, (int[]){3, 2, 1, 0}, 4, &m));
    cr_assert_eq(tl_mesh_device_at_coords(m, (int64_t[]){0, 1}), 2);
    cr_assert_eq(tl_mesh_index_of(m, 0), 3);
    int64_t c[2];
    int proc;
    ASSERT_OK(tl_mesh_locate(m, 1, 2, c, &proc));
    cr_assert_eq(c[0], 1);
    cr_assert_eq(c[1], 0);
    cr_assert_eq(proc, 0);
    ASSERT_ERR(tl_mesh_locate(m, 7, 2, c, &proc), TL_ENOTFOUND, "device cpu:7 is not in the mesh");
    ASSERT_ERR(tl_mesh_locate(m, 1, 0, c, &proc), TL_EINVAL, "local_devices must be >= 1");
    tl_mesh_destroy(m);
    tl_mesh_destroy(NULL);
}

/* ---- TensorLayout ------------------------------------------------------- */

/* Most layouts are on the mesh (4, 2) ["data", "model"], tu_fx_mesh. */
TestSuite(layout, .init = tu_fx_mesh_setup, .fini = tu_fx_mesh_teardown);

Test(layout, TL_1_axes_and_mesh)
{
    tl_layout *l;
    ASSERT_OK(tl_layout_create((const char *[]){"data", NULL}, 2, tu_fx_mesh, &l));
    cr_assert_eq(tl_layout_rank(l), 2);
    cr_assert_str_eq(tl_layout_axis(l, 0), "data");
    cr_assert_null(tl_layout_axis(l, 1));
    cr_assert_null(tl_layout_axis(l, 2));
    cr_assert_eq(tl_layout_mesh(l), tu_fx_mesh);
    char buf[160];
    tl_layout_repr(l, buf, sizeof buf);
    cr_assert_str_eq(buf, "<TensorLayout axes=('data', None), device_mesh=<DeviceMesh shape=(4, 2), "
                          "axis_names=['data', 'model']>>");
    tl_layout_destroy(l);
}

Test(layout, TL_2_unknown_axis)
{
    tl_layout *l;
    ASSERT_ERR(tl_layout_create((const char *[]){"data", "unknown", NULL}, 3, tu_fx_mesh, &l), TL_EINVAL,
               "Invalid axis names for Layout. Valid axis names: {'data', 'model'}, Got {'data', 'unknown'}");
    cr_assert_null(l);
}

Test(layout, TL_3_attach_mesh)
{
    tl_layout *l;
    ASSERT_OK(tl_layout_create((const char *[]){"data", NULL}, 2, NULL, &l));
    cr_assert_null(tl_layout_mesh(l));
    char buf[128];
    tl_layout_repr(l, buf, sizeof buf);
    cr_assert_str_eq(buf, "<TensorLayout axes=('data', None), device_mesh=None>");
    ASSERT_OK(tl_layout_set_mesh(l, tu_fx_mesh));
    cr_assert_eq(tl_layout_mesh(l), tu_fx_mesh);
    tl_layout_destroy(l);
}

Test(layout, TL_4_attach_mesh_validates)
{
    tl_layout *l;
    ASSERT_OK(tl_layout_create((const char *[]){"data", "unknown", NULL}, 3, NULL, &l));
    ASSERT_ERR(tl_layout_set_mesh(l, tu_fx_mesh), TL_EINVAL, "Invalid axis names for Layout");
    cr_assert_null(tl_layout_mesh(l));
    tl_layout_destroy(l);
}

Test(layout, TL_5_cannot_override_mesh)
{
    tl_layout *l;
    ASSERT_OK(tl_layout_create((const char *[]){"data", NULL}, 2, tu_fx_mesh, &l));
    ASSERT_ERR(tl_layout_set_mesh(l, tu_fx_mesh), TL_EINVAL,
               "Cannot override device mesh value. Existing value is <DeviceMesh shape=(4, 2), "
               "axis_names=['data', 'model']>");
    tl_layout_destroy(l);
}

Test(layout, TL_6_sharding_needs_mesh)
{
    tl_layout *l;
    ASSERT_OK(tl_layout_create((const char *[]){"data", NULL}, 2, NULL, &l));
    int64_t off[2], size[2];
    ASSERT_ERR(tl_layout_block(l, (int64_t[]){8, 2}, 2, 0, off, size), TL_EINVAL,
               "Cannot create sharding when device mesh is not set for TensorLayout.");
    tl_layout_destroy(l);
}

Test(layout, TL_7_entry_naming_two_axes)
{
    tl_layout *l;
    /* C has no tuple entry; the text of one (or any string naming two axes)
     * is not an axis name, as Keras' tuple is not. */
    ASSERT_ERR(tl_layout_create((const char *[]){"('data', 'model')", NULL}, 2, tu_fx_mesh, &l), TL_EINVAL,
               "Invalid axis names for Layout");
    ASSERT_ERR(tl_layout_create((const char *[]){"data,model", NULL}, 2, tu_fx_mesh, &l), TL_EINVAL,
               "Invalid axis names for Layout");
}

Test(layout, copy_and_scalar_layout)
{
    tl_layout *l, *c;
    ASSERT_OK(tl_layout_create((const char *[]){NULL, "model"}, 2, tu_fx_mesh, &l));
    ASSERT_OK(tl_layout_copy(l, &c));
    tl_layout_destroy(l);
    cr_assert_eq(tl_layout_rank(c), 2);
    cr_assert_null(tl_layout_axis(c, 0));
    cr_assert_str_eq(tl_layout_axis(c, 1), "model");
    cr_assert_eq(tl_layout_mesh(c), tu_fx_mesh);
    tl_layout_destroy(c);

    ASSERT_OK(tl_layout_create(NULL, 0, tu_fx_mesh, &l));
    char buf[128];
    tl_layout_repr(l, buf, sizeof buf);
    const char *want = "<TensorLayout axes=(), device_mesh=<DeviceMesh";
    cr_assert(strncmp(buf, want, strlen(want)) == 0, "%s", buf);
    tl_layout_destroy(l);
    ASSERT_ERR(tl_layout_create(NULL, -1, tu_fx_mesh, &l), TL_EINVAL, "rank must be >= 0");
    tl_layout_destroy(NULL);
}

/* ---- per-device placement ----------------------------------------------- */

Test(placement, PD_1_batch_rows_replicated_over_model)
{
    enum { D = 8 };
    tl_devices *devs = tu_devices(D, 1, 0);
    tl_mesh *m = tu_mesh2(devs, D / 2, 2, "batch", "model");
    tl_layout *l;
    ASSERT_OK(tl_layout_create((const char *[]){"batch", NULL}, 2, m, &l));
    int64_t shape[2] = {3 * D / 2, 5};
    for (int b = 0; b < D / 2; b++) {
        for (int mm = 0; mm < 2; mm++) {
            int64_t off[2], size[2];
            ASSERT_OK(tl_layout_block(l, shape, 2, b * 2 + mm, off, size));
            cr_assert_eq(size[0], 3);
            cr_assert_eq(size[1], 5);
            cr_assert_eq(off[0], 3 * b);
            cr_assert_eq(off[1], 0);
            int64_t off2[2], size2[2];
            ASSERT_OK(tl_layout_block_at(l, shape, 2, (int64_t[]){b, mm}, off2, size2));
            cr_assert_eq(off2[0], off[0]);
            cr_assert_eq(size2[0], size[0]);
        }
    }
    tl_layout_destroy(l);
    tl_mesh_destroy(m);
    tl_devices_destroy(devs);
}

Test(placement, PD_3_kernel_blocks_across_four_processes)
{
    enum { P = 4, L = 2 };
    tl_devices *devs = tu_devices(L, P, 0);
    tl_mesh *m = tu_mesh2(devs, 4, 2, "batch", "model");
    tl_layout *l;
    ASSERT_OK(tl_layout_create((const char *[]){"batch", "model"}, 2, m, &l));
    int kernel[8][4], gathered[8][4];
    for (int i = 0; i < 32; i++) {
        kernel[i / 4][i % 4] = i;
        gathered[i / 4][i % 4] = -1;
    }
    int blocks_of[P] = {0};
    for (int dev = 0; dev < 8; dev++) {
        int64_t c[2], off[2], size[2];
        int proc;
        ASSERT_OK(tl_mesh_locate(m, dev, L, c, &proc));
        blocks_of[proc]++;
        ASSERT_OK(tl_layout_block(l, (int64_t[]){8, 4}, 2, tl_mesh_index_of(m, dev), off, size));
        cr_assert_eq(size[0], 2);
        cr_assert_eq(size[1], 2);
        cr_assert_eq(off[0], 2 * c[0]);
        cr_assert_eq(off[1], 2 * c[1]);
        for (int r = 0; r < size[0]; r++)
            for (int k = 0; k < size[1]; k++) {
                cr_assert_eq(gathered[off[0] + r][off[1] + k], -1, "cell held twice");
                gathered[off[0] + r][off[1] + k] = kernel[off[0] + r][off[1] + k];
            }
    }
    for (int p = 0; p < P; p++)
        cr_assert_eq(blocks_of[p], L);
    cr_assert(memcmp(kernel, gathered, sizeof kernel) == 0);
    tl_layout_destroy(l);
    tl_mesh_destroy(m);
    tl_devices_destroy(devs);
}

Test(placement, PD_5_uneven_split)
{
    tl_devices *devs = tu_devices(8, 1, 0);
    tl_mesh *m = tu_mesh1(devs, 8, "batch");
    tl_layout *l;
    ASSERT_OK(tl_layout_create((const char *[]){"batch", NULL}, 2, m, &l));
    int64_t off[2], size[2];
    ASSERT_ERR(tl_layout_block(l, (int64_t[]){10, 3}, 2, 0, off, size), TL_EINVAL,
               "dimension 0 should be divisible by 8 (the size of mesh axis 'batch'), but it is equal to 10");
    tl_layout_destroy(l);
    tl_mesh_destroy(m);
    tl_devices_destroy(devs);
}

Test(placement, rank_and_axis_checks)
{
    tl_devices *devs = tu_devices(8, 1, 0);
    tl_mesh *m = tu_mesh2(devs, 4, 2, "batch", "model");
    tl_layout *l;
    int64_t off[3], size[3];
    ASSERT_OK(tl_layout_create((const char *[]){"batch", NULL, "model"}, 3, m, &l));
    ASSERT_ERR(tl_layout_block(l, (int64_t[]){8, 2}, 2, 0, off, size), TL_EINVAL,
               "implies a rank of at least 3, but the tensor has rank 2");
    ASSERT_ERR(tl_layout_block(l, (int64_t[]){8, 2, 4}, 3, 8, off, size), TL_EINVAL, "out of range");
    ASSERT_ERR(tl_layout_block_at(l, (int64_t[]){8, 2, 4}, 3, (int64_t[]){0, 2}, off, size), TL_EINVAL,
               "outside [0, 2)");
    tl_layout_destroy(l);

    ASSERT_OK(tl_layout_create((const char *[]){"model", "model"}, 2, m, &l));
    ASSERT_ERR(tl_layout_block(l, (int64_t[]){8, 2}, 2, 0, off, size), TL_EINVAL,
               "uses 'model' for dimensions 0 and 1");
    tl_layout_destroy(l);

    /* Fewer entries than dimensions: the rest are whole (JAX's rule). */
    ASSERT_OK(tl_layout_create((const char *[]){"model"}, 1, m, &l));
    ASSERT_OK(tl_layout_block(l, (int64_t[]){6, 5, 7}, 3, 3, off, size));
    cr_assert_eq(off[0], 3);
    cr_assert_eq(size[0], 3);
    cr_assert_eq(size[1], 5);
    cr_assert_eq(size[2], 7);
    tl_layout_destroy(l);
    tl_mesh_destroy(m);
    tl_devices_destroy(devs);
}

/* ---- allocation failures ------------------------------------------------ */

/* A (4, 2) mesh of the devices ctx: NULL out on failure. */
static tl_status mesh_create(void *ctx)
{
    const char *names[] = {"batch", "model"};
    tl_mesh *m;
    tl_status st = tl_mesh_create(ctx, (int64_t[]){4, 2}, 2, names, 2, NULL, 0, &m);
    if (st != TL_OK) {
        cr_assert_null(m);
        return st;
    }
    tl_mesh_destroy(m);
    return st;
}

Test(mesh, oom_mesh_create_unwinds)
{
    tl_devices *devs = tu_devices(8, 1, 0);
    cr_assert_gt(tu_oom_sweep(mesh_create, devs, "tl_mesh_create"), 3);
    tl_devices_destroy(devs);
}

/* A rank-3 layout on the mesh ctx. */
static tl_status layout_create(void *ctx)
{
    tl_layout *l;
    tl_status st = tl_layout_create((const char *[]){"data", NULL, "model"}, 3, ctx, &l);
    if (st == TL_OK)
        tl_layout_destroy(l);
    return st;
}

Test(layout, oom_layout_create_unwinds)
{
    cr_assert_eq(tu_oom_sweep(layout_create, tu_fx_mesh, "tl_layout_create"), 4);
}
