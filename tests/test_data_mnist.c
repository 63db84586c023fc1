/* The MNIST / Fashion-MNIST loader: the real Fashion-MNIST files of Debian's
 * dataset-fashion-mnist (installed by scripts/install-deps), checked against
 * a tiny independent reader and known facts, and small hand-made sets for
 * every way the files can disagree. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <zlib.h>

#include "testutil.h"
#include "tpuloop/data.h"

/* ---- the real files --------------------------------------------------------- */

/* n bytes at offset off of the decompressed file dir/name, read with zlib
 * alone (not tpuloop). */
static void gz_peek(const char *name, long off, unsigned char *out, unsigned n)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", TL_FASHION_MNIST_DIR, name);
    gzFile g = gzopen(path, "rb");
    cr_assert_not_null(g, "%s: cannot open; install it with apt-get install dataset-fashion-mnist", path);
    cr_assert_eq(gzseek(g, off, SEEK_SET), off);
    cr_assert_eq(gzread(g, out, n), (int)n);
    gzclose(g);
}

static tl_labeled_data *load(const char *split)
{
    tl_labeled_data *d;
    ASSERT_OK(tl_mnist_load(NULL, split, &d));
    return d;
}

/* Shape, labels in 0..9 with the given count per class, pixels in [0, 1]
 * with the given mean, and example 0 against the independent reader. */
static void check_split(const tl_labeled_data *d, int64_t n, const char *prefix, int first_label, double mean)
{
    cr_assert_eq(d->num_examples, n);
    cr_assert_eq(d->num_features, 784);
    cr_assert_eq(d->num_classes, 10);
    cr_assert_eq(d->feature_rank, 2);
    cr_assert_eq(d->feature_shape[0], 28);
    cr_assert_eq(d->feature_shape[1], 28);

    int64_t per_class[10] = {0};
    for (int64_t i = 0; i < n; i++) {
        cr_assert(d->labels[i] >= 0 && d->labels[i] <= 9, "label %d at %lld", d->labels[i], (long long)i);
        per_class[d->labels[i]]++;
    }
    for (int c = 0; c < 10; c++) /* Fashion-MNIST is exactly balanced */
        cr_assert_eq(per_class[c], n / 10, "class %d has %lld examples", c, (long long)per_class[c]);

    double sum = 0.0;
    float lo = 1.0f, hi = 0.0f;
    for (int64_t i = 0; i < n * 784; i++) {
        float v = d->features[i];
        lo = v < lo ? v : lo;
        hi = v > hi ? v : hi;
        sum += v;
    }
    cr_assert_eq(lo, 0.0f);
    cr_assert_eq(hi, 1.0f);
    cr_assert(fabs(sum / (double)(n * 784) - mean) < 5e-5, "mean pixel %.6f, want %.6f", sum / (double)(n * 784),
              mean);

    char name[64];
    unsigned char y, px[784];
    snprintf(name, sizeof name, "%s-labels-idx1-ubyte.gz", prefix);
    gz_peek(name, 8, &y, 1);
    cr_assert_eq(y, first_label, "the file's first label is %d", y);
    cr_assert_eq(d->labels[0], first_label);
    snprintf(name, sizeof name, "%s-images-idx3-ubyte.gz", prefix);
    gz_peek(name, 16, px, 784);
    for (int j = 0; j < 784; j++)
        cr_assert_eq(d->features[j], (float)px[j] / 255.0f, "pixel %d", j);
    gz_peek(name, 16 + (long)(n - 1) * 784, px, 784);
    for (int j = 0; j < 784; j++)
        cr_assert_eq(d->features[(n - 1) * 784 + j], (float)px[j] / 255.0f, "last image, pixel %d", j);
}

/* Known facts: 60000 training and 10000 test images of 28x28, 6000 and 1000
 * per class, the first label of both splits 9 (ankle boot), and the mean pixel
 * 0.2860 (train) and 0.2869 (test), the normalisation constants everyone uses. */
Test(fashion_mnist, train_split)
{
    tl_labeled_data *d = load("train");
    check_split(d, 60000, "train", 9, 0.286041);
    tl_labeled_data_destroy(d);
}

Test(fashion_mnist, test_split)
{
    tl_labeled_data *d = load("test");
    check_split(d, 10000, "t10k", 9, 0.286850);
    tl_labeled_data_destroy(d);
}

/* ---- hand-made sets ---------------------------------------------------------- */

/* An IDX file dir/name of u8 elements (gzip when name ends in .gz). */
static void write_idx(const char *dir, const char *name, uint8_t type, int ndim, const uint32_t *dims,
                      const uint8_t *v, size_t n)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    unsigned char h[4 + 4 * 8] = {0, 0, type, (unsigned char)ndim};
    for (int i = 0; i < ndim; i++)
        for (int b = 0; b < 4; b++)
            h[4 + 4 * i + b] = (unsigned char)(dims[i] >> (24 - 8 * b));
    size_t len = strlen(name);
    bool gz = len > 3 && strcmp(name + len - 3, ".gz") == 0;
    gzFile g = gzopen(path, gz ? "wb" : "wbT"); /* T: no compression */
    cr_assert_not_null(g);
    cr_assert_eq(gzwrite(g, h, 4 + 4 * (unsigned)ndim), 4 + 4 * ndim);
    if (n > 0)
        cr_assert_eq(gzwrite(g, v, (unsigned)n), (int)n);
    gzclose(g);
}

static char tmpdir[64];

static void make_dir(void)
{
    strcpy(tmpdir, "/tmp/tl_mnist_XXXXXX");
    cr_assert_not_null(mkdtemp(tmpdir));
}

static void remove_dir(void)
{
    static const char *names[] = {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
                                  "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte", "train-images-idx3-ubyte"};
    char path[512];
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", tmpdir, names[i]);
        unlink(path);
    }
    rmdir(tmpdir);
}

/* Three 2x3 images with pixels 0..17 scaled to 255, labels 3, 0, 9. */
static const uint8_t small_px[18] = {0, 15, 30, 45, 60, 75, 90, 105, 120, 135, 150, 165, 180, 195, 210, 225, 240, 255};
static const uint8_t small_y[3] = {3, 0, 9};

static void write_small(const char *prefix, bool gz, int nlabels, const uint8_t *labels)
{
    char img[64], lab[64];
    snprintf(img, sizeof img, "%s-images-idx3-ubyte%s", prefix, gz ? ".gz" : "");
    snprintf(lab, sizeof lab, "%s-labels-idx1-ubyte%s", prefix, gz ? ".gz" : "");
    write_idx(tmpdir, img, 0x08, 3, (uint32_t[]){3, 2, 3}, small_px, 18);
    write_idx(tmpdir, lab, 0x08, 1, (uint32_t[]){(uint32_t)nlabels}, labels, (size_t)nlabels);
}

TestSuite(mnist, .init = make_dir, .fini = remove_dir);

Test(mnist, small_set_gzip_and_plain)
{
    write_small("train", true, 3, small_y);
    write_small("t10k", false, 3, small_y);
    for (int s = 0; s < 2; s++) {
        tl_labeled_data *d;
        ASSERT_OK(tl_mnist_load(tmpdir, s ? "test" : "train", &d));
        cr_assert_eq(d->num_examples, 3);
        cr_assert_eq(d->num_features, 6);
        cr_assert_eq(d->feature_shape[0], 2);
        cr_assert_eq(d->feature_shape[1], 3);
        for (int i = 0; i < 18; i++)
            cr_assert_eq(d->features[i], (float)small_px[i] / 255.0f, "pixel %d", i);
        cr_assert_eq(d->features[17], 1.0f);
        cr_assert_eq(d->labels[0], 3);
        cr_assert_eq(d->labels[2], 9);
        tl_labeled_data_destroy(d);
    }
}

Test(mnist, gz_is_preferred_over_plain)
{
    write_small("train", true, 3, small_y);
    write_idx(tmpdir, "train-images-idx3-ubyte", 0x08, 3, (uint32_t[]){1, 1, 1}, small_px, 1);
    tl_labeled_data *d;
    ASSERT_OK(tl_mnist_load(tmpdir, "train", &d));
    cr_assert_eq(d->num_examples, 3);
    tl_labeled_data_destroy(d);
}

Test(mnist, missing_files_say_how_to_install)
{
    tl_labeled_data *d = (tl_labeled_data *)&d;
    ASSERT_ERR(tl_mnist_load(tmpdir, "train", &d), TL_EIO, "/train-labels-idx1-ubyte.gz (or train-labels-idx1-ubyte "
                                                           "without .gz) not found; install them with: apt-get install "
                                                           "dataset-fashion-mnist, or run scripts/install-deps");
    cr_assert_null(d);
    ASSERT_ERR(tl_mnist_load("/nonexistent/fashion", "test", &d), TL_EIO,
               "/nonexistent/fashion/t10k-labels-idx1-ubyte.gz");
    /* labels present, images missing */
    write_idx(tmpdir, "train-labels-idx1-ubyte.gz", 0x08, 1, (uint32_t[]){3}, small_y, 3);
    ASSERT_ERR(tl_mnist_load(tmpdir, "train", &d), TL_EIO, "train-images-idx3-ubyte without .gz) not found; install");
}

Test(mnist, bad_split)
{
    tl_labeled_data *d;
    ASSERT_ERR(tl_mnist_load(tmpdir, "validation", &d), TL_EINVAL,
               "MNIST split must be \"train\" or \"test\", got \"validation\"");
    ASSERT_ERR(tl_mnist_load(tmpdir, NULL, &d), TL_EINVAL, "got NULL");
    cr_assert_null(d);
}

Test(mnist, counts_must_agree)
{
    write_small("train", true, 2, small_y);
    tl_labeled_data *d;
    ASSERT_ERR(tl_mnist_load(tmpdir, "train", &d), TL_EPARSE,
               "train-images-idx3-ubyte.gz has 3 images but");
    cr_assert(strstr(tl_last_error(), "train-labels-idx1-ubyte.gz has 2 labels; the counts must agree"),
              "%s", tl_last_error());
}

Test(mnist, label_out_of_range)
{
    write_small("train", true, 3, (const uint8_t[]){3, 0, 10});
    tl_labeled_data *d;
    ASSERT_ERR(tl_mnist_load(tmpdir, "train", &d), TL_EPARSE,
               "train-labels-idx1-ubyte.gz: label 10 at index 2 is outside 0..9");
}

Test(mnist, wrong_types_and_ranks)
{
    write_small("train", true, 3, small_y);
    write_idx(tmpdir, "train-images-idx3-ubyte.gz", 0x08, 2, (uint32_t[]){3, 6}, small_px, 18);
    tl_labeled_data *d;
    ASSERT_ERR(tl_mnist_load(tmpdir, "train", &d), TL_EPARSE,
               "MNIST images must be u8 with 3 dimensions (N, rows, cols); got u8 with 2");
    write_idx(tmpdir, "train-images-idx3-ubyte.gz", 0x09, 3, (uint32_t[]){3, 2, 3}, small_px, 18);
    ASSERT_ERR(tl_mnist_load(tmpdir, "train", &d), TL_EPARSE, "got i8 with 3");
    write_small("train", true, 3, small_y);
    write_idx(tmpdir, "train-labels-idx1-ubyte.gz", 0x08, 2, (uint32_t[]){3, 1}, small_y, 3);
    ASSERT_ERR(tl_mnist_load(tmpdir, "train", &d), TL_EPARSE, "MNIST labels must be u8 with 1 dimension (N)");
    /* an IDX error inside is passed on with its file name */
    write_idx(tmpdir, "train-labels-idx1-ubyte.gz", 0x08, 1, (uint32_t[]){4}, small_y, 3);
    ASSERT_ERR(tl_mnist_load(tmpdir, "train", &d), TL_EPARSE, "train-labels-idx1-ubyte.gz: the data is cut short");
}

Test(mnist, no_examples)
{
    write_idx(tmpdir, "train-images-idx3-ubyte.gz", 0x08, 3, (uint32_t[]){0, 28, 28}, NULL, 0);
    write_idx(tmpdir, "train-labels-idx1-ubyte.gz", 0x08, 1, (uint32_t[]){0}, NULL, 0);
    tl_labeled_data *d;
    ASSERT_ERR(tl_mnist_load(tmpdir, "train", &d), TL_EPARSE, "no examples");
}

static tl_status oom_load(void *ctx)
{
    tl_labeled_data *d;
    tl_status st = tl_mnist_load(ctx, "train", &d);
    tl_labeled_data_destroy(d);
    return st;
}

Test(mnist, every_allocation_failure_unwinds)
{
    write_small("train", true, 3, small_y);
    long runs = tu_oom_sweep(oom_load, tmpdir, "tl_mnist_load");
    cr_assert_geq(runs, 10, "only %ld allocations", runs);
    tl_labeled_data_destroy(NULL);
}
