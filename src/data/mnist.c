/* mnist.c — MNIST and Fashion-MNIST: two IDX files per split, checked
 * against each other and turned into float32 features in [0, 1]. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../base/base_int.h"
#include "data_int.h"

#define MNIST_CLASSES 10

static const char install_hint[] =
    "install them with: apt-get install dataset-fashion-mnist, or run scripts/install-deps";

/* The path of dir/<base>.gz if it exists, else of dir/<base> if that exists;
 * *path is NULL with TL_EIO when neither does. */
static tl_status find_file(const char *dir, const char *base, char **path)
{
    *path = tl_asprintf("%s/%s.gz", dir, base);
    if (*path == NULL)
        return tl_error_oom();
    if (access(*path, F_OK) == 0)
        return TL_OK;
    tl_free(*path);
    *path = tl_asprintf("%s/%s", dir, base);
    if (*path == NULL)
        return tl_error_oom();
    if (access(*path, F_OK) == 0)
        return TL_OK;
    tl_free(*path);
    *path = NULL;
    return tl_error(TL_EIO, "%s/%s.gz (or %s without .gz) not found; %s", dir, base, base, install_hint);
}

static tl_status read_split_file(const char *dir, const char *base, tl_idx **out, char **path)
{
    tl_status st = find_file(dir, base, path);
    if (st == TL_OK)
        st = tl_idx_read_file(*path, NULL, out);
    return st;
}

/* The shapes MNIST's files have: u8 images (N, H, W), u8 labels (N). */
static tl_status check_shapes(const tl_idx *img, const char *img_path, const tl_idx *lab, const char *lab_path)
{
    if (tl_idx_type(img) != TL_IDX_U8 || tl_idx_ndim(img) != 3)
        return tl_error(TL_EPARSE, "%s: MNIST images must be u8 with 3 dimensions (N, rows, cols); got %s with %d",
                        img_path, tl_idx_dtype_name(tl_idx_type(img)), tl_idx_ndim(img));
    if (tl_idx_type(lab) != TL_IDX_U8 || tl_idx_ndim(lab) != 1)
        return tl_error(TL_EPARSE, "%s: MNIST labels must be u8 with 1 dimension (N); got %s with %d", lab_path,
                        tl_idx_dtype_name(tl_idx_type(lab)), tl_idx_ndim(lab));
    if (tl_idx_dim(img, 0) != tl_idx_dim(lab, 0))
        return tl_error(TL_EPARSE, "%s has %lld images but %s has %lld labels; the counts must agree", img_path,
                        (long long)tl_idx_dim(img, 0), lab_path, (long long)tl_idx_dim(lab, 0));
    if (tl_idx_dim(img, 0) == 0)
        return tl_error(TL_EPARSE, "%s: no examples (the IDX header gives 0 images)", img_path);
    const uint8_t *y = tl_idx_data(lab);
    for (int64_t i = 0; i < tl_idx_dim(lab, 0); i++)
        if (y[i] >= MNIST_CLASSES)
            return tl_error(TL_EPARSE, "%s: label %u at index %lld is outside 0..%d", lab_path, y[i], (long long)i,
                            MNIST_CLASSES - 1);
    return TL_OK;
}

static tl_status convert(const tl_idx *img, const tl_idx *lab, tl_labeled_data **out)
{
    int64_t shape[2] = {tl_idx_dim(img, 1), tl_idx_dim(img, 2)};
    int64_t n = tl_idx_dim(img, 0);
    tl_labeled_data *d = tl_labeled_data_alloc(n, shape, 2, MNIST_CLASSES, 0);
    if (d == NULL)
        return tl_error_oom();
    /* x / 255 rounded once in float, as numpy's x.astype(np.float32) / 255 */
    float scale[256];
    for (int v = 0; v < 256; v++)
        scale[v] = (float)v / 255.0f;
    const uint8_t *px = tl_idx_data(img);
    int64_t total = tl_idx_count(img);
    for (int64_t i = 0; i < total; i++)
        d->features[i] = scale[px[i]];
    const uint8_t *y = tl_idx_data(lab);
    for (int64_t i = 0; i < n; i++)
        d->labels[i] = y[i];
    *out = d;
    return TL_OK;
}

tl_status tl_mnist_load(const char *dir, const char *split, tl_labeled_data **out)
{
    *out = NULL;
    const char *prefix;
    if (split != NULL && strcmp(split, "train") == 0)
        prefix = "train";
    else if (split != NULL && strcmp(split, "test") == 0)
        prefix = "t10k";
    else
        return tl_error(TL_EINVAL, "MNIST split must be \"train\" or \"test\", got %s%s%s", split ? "\"" : "",
                        split ? split : "NULL", split ? "\"" : "");
    if (dir == NULL)
        dir = TL_FASHION_MNIST_DIR;

    char img_base[64], lab_base[64];
    snprintf(img_base, sizeof img_base, "%s-images-idx3-ubyte", prefix);
    snprintf(lab_base, sizeof lab_base, "%s-labels-idx1-ubyte", prefix);
    char *img_path = NULL, *lab_path = NULL;
    tl_idx *img = NULL, *lab = NULL;
    /* labels first: they are small, and a missing or broken label file is
     * reported before a second of image decompression */
    tl_status st = read_split_file(dir, lab_base, &lab, &lab_path);
    if (st == TL_OK)
        st = read_split_file(dir, img_base, &img, &img_path);
    if (st == TL_OK)
        st = check_shapes(img, img_path, lab, lab_path);
    if (st == TL_OK)
        st = convert(img, lab, out);
    tl_idx_destroy(img);
    tl_idx_destroy(lab);
    tl_free(img_path);
    tl_free(lab_path);
    return st;
}
