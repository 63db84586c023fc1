/* test_layout_map.c — LayoutMap: the LM-* vectors of distribution.md §14.6
 * in both matching modes, the Python-regex subset keys may use, and
 * allocation-failure unwinding of insertion. */
#include <stdio.h>
#include <string.h>

#include "testutil.h"

static tl_layout *layout(const char *const *axes, int rank)
{
    tl_layout *l;
    ASSERT_OK(tl_layout_create(axes, rank, NULL, &l));
    return l;
}

/* s2 = (None, "model"), s1 = ("model",), r2 = (None, None), r1 = (None,) */
static tl_layout *s2(void) { return layout((const char *[]){NULL, "model"}, 2); }
static tl_layout *s1(void) { return layout((const char *[]){"model"}, 1); }
static tl_layout *r2(void) { return layout((const char *[]){NULL, NULL}, 2); }
static tl_layout *r1(void) { return layout((const char *[]){NULL}, 1); }

static bool is_s2(const tl_layout *l)
{
    return l != NULL && tl_layout_rank(l) == 2 && tl_layout_axis(l, 0) == NULL &&
           strcmp(tl_layout_axis(l, 1), "model") == 0;
}

static bool is_s1(const tl_layout *l)
{
    return l != NULL && tl_layout_rank(l) == 1 && strcmp(tl_layout_axis(l, 0), "model") == 0;
}

static bool is_r(const tl_layout *l, int rank)
{
    if (l == NULL || tl_layout_rank(l) != rank)
        return false;
    for (int i = 0; i < rank; i++)
        if (tl_layout_axis(l, i) != NULL)
            return false;
    return true;
}

static const tl_layout *get(const tl_layout_map *m, const char *path)
{
    const tl_layout *l;
    ASSERT_OK(tl_layout_map_get(m, path, &l));
    return l;
}

/* The LM-4 map; prefix is ".*" for 3.15 keys and "" for <= 3.13 keys. */
static tl_layout_map *lm4_map(tl_match_mode mode, const char *prefix)
{
    tl_layout_map *m;
    ASSERT_OK(tl_layout_map_create(tu_fx_mesh, mode, &m));
    char k[64];
    ASSERT_OK(tl_layout_map_set(m, "dense/kernel", s2()));
    ASSERT_OK(tl_layout_map_set(m, "dense/bias", s1()));
    snprintf(k, sizeof k, "%sdense.*kernel", prefix);
    ASSERT_OK(tl_layout_map_set(m, k, r2()));
    snprintf(k, sizeof k, "%sdense.*bias", prefix);
    ASSERT_OK(tl_layout_map_set(m, k, r1()));
    snprintf(k, sizeof k, "%sbias", prefix);
    ASSERT_OK(tl_layout_map_set(m, k, s1()));
    return m;
}

/* The §14.6 fixture: mesh (4, 2) ["data", "model"], tu_fx_mesh. */
TestSuite(layout_map, .init = tu_fx_mesh_setup, .fini = tu_fx_mesh_teardown);

Test(layout_map, LM_1_set_and_attach_mesh)
{
    tl_layout_map *m;
    ASSERT_OK(tl_layout_map_create(tu_fx_mesh, TL_MATCH_FULL, &m));
    ASSERT_OK(tl_layout_map_set(m, "dense/kernel", s2()));
    ASSERT_OK(tl_layout_map_set(m, "dense/bias", s1()));
    ASSERT_OK(tl_layout_map_set_axes(m, "conv/bias", (const char *[]){"model"}, 1));
    cr_assert_eq(tl_layout_map_size(m), 3);
    cr_assert(is_s1(get(m, "conv/bias")));
    for (int i = 0; i < 3; i++)
        cr_assert_eq(tl_layout_mesh(tl_layout_map_value(m, i)), tu_fx_mesh);
    cr_assert_eq(tl_layout_map_mesh(m), tu_fx_mesh);
    cr_assert_eq(tl_layout_map_mode(m), TL_MATCH_FULL);
    tl_layout_map_destroy(m);
}

Test(layout_map, LM_2_duplicate_key)
{
    tl_layout_map *m;
    ASSERT_OK(tl_layout_map_create(tu_fx_mesh, TL_MATCH_FULL, &m));
    ASSERT_OK(tl_layout_map_set(m, "dense/kernel", s2()));
    ASSERT_ERR(tl_layout_map_set(m, "dense/kernel", s2()), TL_EINVAL,
               "dense/kernel already exist in the LayoutMap with value <TensorLayout axes=(None, 'model')");
    cr_assert(strstr(tl_last_error(), "Please make sure to not use duplicated keys.") != NULL);
    cr_assert_eq(tl_layout_map_size(m), 1);
    tl_layout_map_destroy(m);
}

Test(layout_map, LM_3_value_not_a_layout)
{
    /* C's type system admits no list value; NULL is the one non-layout. */
    tl_layout_map *m;
    ASSERT_OK(tl_layout_map_create(tu_fx_mesh, TL_MATCH_FULL, &m));
    ASSERT_ERR(tl_layout_map_set(m, "conv.kernel", NULL), TL_EINVAL, "should be a TensorLayout");
    cr_assert_eq(tl_layout_map_size(m), 0);
    tl_layout_map_destroy(m);
}

Test(layout_map, LM_4_exact_keys_win)
{
    tl_layout_map *m = lm4_map(TL_MATCH_FULL, ".*");
    cr_assert(is_s2(get(m, "dense/kernel")));
    cr_assert(is_s1(get(m, "dense/bias")));
    tl_layout_map_destroy(m);
}

Test(layout_map, LM_5_regex_match)
{
    tl_layout_map *m = lm4_map(TL_MATCH_FULL, ".*");
    cr_assert(is_r(get(m, "dense_2/kernel"), 2));
    tl_layout_map_destroy(m);
}

Test(layout_map, LM_6_multiple_matches)
{
    tl_layout_map *m = lm4_map(TL_MATCH_FULL, ".*");
    const tl_layout *l;
    ASSERT_ERR(tl_layout_map_get(m, "dense_2/bias", &l), TL_EINVAL,
               "Path 'dense_2/bias' matches multiple layout specification keys: ['.*dense.*bias', '.*bias']. "
               "Please make sure each tensor/variable path only matches at most one layout specification key "
               "in the LayoutMap.");
    cr_assert_null(l);
    tl_layout_map_destroy(m);
}

Test(layout_map, LM_7_no_match_is_none)
{
    tl_layout_map *m = lm4_map(TL_MATCH_FULL, ".*");
    cr_assert_null(get(m, "conv2d/kernel"));
    cr_assert(is_s1(get(m, "conv2d/bias")));
    tl_layout_map_destroy(m);
}

Test(layout_map, LM_8_search_mode_without_leading_dot_star)
{
    tl_layout_map *m = lm4_map(TL_MATCH_SEARCH, "");
    cr_assert(is_s2(get(m, "dense/kernel")));
    cr_assert(is_s1(get(m, "dense/bias")));
    cr_assert(is_r(get(m, "dense_2/kernel"), 2));
    const tl_layout *l;
    ASSERT_ERR(tl_layout_map_get(m, "dense_2/bias", &l), TL_EINVAL,
               "Path 'dense_2/bias' matches multiple layout specification keys: ['dense.*bias', 'bias']");
    cr_assert_null(get(m, "conv2d/kernel"));
    cr_assert(is_s1(get(m, "conv2d/bias")));
    tl_layout_map_destroy(m);
}

Test(layout_map, LM_9_full_versus_search)
{
    tl_match_mode modes[] = {TL_MATCH_FULL, TL_MATCH_SEARCH};
    for (int i = 0; i < 2; i++) {
        tl_layout_map *m;
        ASSERT_OK(tl_layout_map_create(tu_fx_mesh, modes[i], &m));
        ASSERT_OK(tl_layout_map_set(m, "dense.*kernel", r2()));
        const tl_layout *l = get(m, "my_model/dense_1/kernel");
        if (modes[i] == TL_MATCH_FULL)
            cr_assert_null(l);
        else
            cr_assert(is_r(l, 2));
        tl_layout_map_destroy(m);
    }
}

Test(layout_map, LM_10_leading_dot_star_matches_in_both)
{
    tl_match_mode modes[] = {TL_MATCH_FULL, TL_MATCH_SEARCH};
    for (int i = 0; i < 2; i++) {
        tl_layout_map *m;
        ASSERT_OK(tl_layout_map_create(tu_fx_mesh, modes[i], &m));
        ASSERT_OK(tl_layout_map_set(m, ".*dense.*kernel", r2()));
        cr_assert(is_r(get(m, "sequential/dense/kernel"), 2));
        tl_layout_map_destroy(m);
    }
}

Test(layout_map, LM_11_docstring_map)
{
    tl_layout_map *m;
    ASSERT_OK(tl_layout_map_create(tu_fx_mesh, TL_MATCH_FULL, &m));
    ASSERT_OK(tl_layout_map_set_axes(m, ".*dense.*kernel", (const char *[]){NULL, "model"}, 2));
    ASSERT_OK(tl_layout_map_set_axes(m, ".*dense.*bias", (const char *[]){"model"}, 1));
    ASSERT_OK(tl_layout_map_set_axes(m, ".*conv2d.*kernel", (const char *[]){NULL, NULL, NULL, "model"}, 4));
    ASSERT_OK(tl_layout_map_set_axes(m, ".*conv2d.*bias", (const char *[]){"model"}, 1));
    cr_assert_eq(tl_layout_rank(get(m, "dense_1.kernel")), 2);
    cr_assert_eq(tl_layout_rank(get(m, "dense_1.bias")), 1);
    cr_assert_eq(tl_layout_rank(get(m, "my_model/conv2d_123/kernel")), 4);
    cr_assert_eq(tl_layout_rank(get(m, "my_model/conv2d_123/bias")), 1);
    cr_assert_null(get(m, "my_model/conv3d_1/kernel"));
    tl_layout_map_destroy(m);
}

Test(layout_map, LM_12_pop_exact_key_only)
{
    tl_layout_map *m = lm4_map(TL_MATCH_FULL, ".*");
    tl_layout *l;
    ASSERT_OK(tl_layout_map_pop(m, "dense/kernel", &l));
    cr_assert(is_s2(l));
    cr_assert_eq(tl_layout_mesh(l), tu_fx_mesh);
    tl_layout_destroy(l);
    cr_assert_eq(tl_layout_map_size(m), 4);
    cr_assert_str_eq(tl_layout_map_key(m, 0), "dense/bias");
    ASSERT_ERR(tl_layout_map_pop(m, "dense/kernel", &l), TL_ENOTFOUND, "KeyError: 'dense/kernel'");
    ASSERT_OK(tl_layout_map_pop(m, ".*bias", &l));
    tl_layout_destroy(l);
    ASSERT_ERR(tl_layout_map_pop(m, ".*bias", &l), TL_ENOTFOUND, "KeyError: '.*bias'");
    cr_assert_null(l);
    /* "dense_2/kernel" matches ".*dense.*kernel" but is not a key. */
    ASSERT_ERR(tl_layout_map_pop(m, "dense_2/kernel", &l), TL_ENOTFOUND, "KeyError");
    cr_assert_eq(tl_layout_map_size(m), 3);
    tl_layout_map_destroy(m);
}

Test(layout_map, LM_13_insertion_order)
{
    tl_layout_map *m;
    ASSERT_OK(tl_layout_map_create(tu_fx_mesh, TL_MATCH_FULL, &m));
    ASSERT_OK(tl_layout_map_set(m, "dense/kernel", s2()));
    ASSERT_OK(tl_layout_map_set(m, "dense/bias", s1()));
    cr_assert_str_eq(tl_layout_map_key(m, 0), "dense/kernel");
    cr_assert_str_eq(tl_layout_map_key(m, 1), "dense/bias");
    cr_assert(is_s2(tl_layout_map_value(m, 0)));
    cr_assert(is_s1(tl_layout_map_value(m, 1)));
    cr_assert_null(tl_layout_map_key(m, 2));
    cr_assert_null(tl_layout_map_value(m, -1));
    tl_layout_map_destroy(m);
}

Test(layout_map, LM_14_invalid_regex_rejected_at_insertion)
{
    tl_layout_map *m;
    ASSERT_OK(tl_layout_map_create(tu_fx_mesh, TL_MATCH_FULL, &m));
    ASSERT_ERR(tl_layout_map_set(m, "dense[", s2()), TL_EINVAL,
               "LayoutMap key 'dense[' is not a supported regular expression: unterminated character set");
    cr_assert_eq(tl_layout_map_size(m), 0);
    cr_assert_null(get(m, "x"));
    tl_layout_map_destroy(m);
}

Test(layout_map, LM_15_exact_hit_without_regex)
{
    tl_layout_map *m;
    ASSERT_OK(tl_layout_map_create(tu_fx_mesh, TL_MATCH_FULL, &m));
    /* tpuloop refuses "dense[" when it is set, so only "x" is stored. */
    ASSERT_ERR(tl_layout_map_set(m, "dense[", s2()), TL_EINVAL, "dense[");
    ASSERT_OK(tl_layout_map_set(m, "x", s1()));
    cr_assert(is_s1(get(m, "x")));
    tl_layout_map_destroy(m);
}

Test(layout_map, LM_16_axes_checked_at_insertion)
{
    tl_layout_map *m;
    ASSERT_OK(tl_layout_map_create(tu_fx_mesh, TL_MATCH_FULL, &m));
    ASSERT_ERR(tl_layout_map_set_axes(m, "k", (const char *[]){"bad"}, 1), TL_EINVAL,
               "Invalid axis names for Layout. Valid axis names: {'data', 'model'}, Got {'bad'}");
    cr_assert_eq(tl_layout_map_size(m), 0);
    tl_layout_map_destroy(m);
}

Test(layout_map, layout_with_own_mesh_keeps_it)
{
    tl_mesh *other = tu_mesh1(tu_fx_devs, 8, "x");
    tl_layout_map *m;
    ASSERT_OK(tl_layout_map_create(tu_fx_mesh, TL_MATCH_FULL, &m));
    tl_layout *l;
    ASSERT_OK(tl_layout_create((const char *[]){"x"}, 1, other, &l));
    ASSERT_OK(tl_layout_map_set(m, "k", l));
    cr_assert_eq(tl_layout_mesh(get(m, "k")), other);
    tl_layout_map_destroy(m);
    tl_mesh_destroy(other);
}

Test(layout_map, create_and_argument_errors)
{
    tl_layout_map *m;
    ASSERT_ERR(tl_layout_map_create(NULL, TL_MATCH_FULL, &m), TL_EINVAL, "needs a DeviceMesh");
    cr_assert_null(m);
    ASSERT_ERR(tl_layout_map_create(tu_fx_mesh, (tl_match_mode)7, &m), TL_EINVAL, "got 7");
    ASSERT_OK(tl_layout_map_create(tu_fx_mesh, TL_MATCH_FULL, &m));
    ASSERT_ERR(tl_layout_map_set(m, NULL, s1()), TL_EINVAL, "the key is NULL");
    const tl_layout *l;
    ASSERT_ERR(tl_layout_map_get(m, NULL, &l), TL_EINVAL, "path to look up is NULL");
    tl_layout_map_destroy(m);
    tl_layout_map_destroy(NULL);
}

/* ---- the regular-expression subset -------------------------------------- */

/* Whether key (the only key of a fresh map) matches path in mode. */
static bool key_matches(tl_match_mode mode, const char *key, const char *path)
{
    tl_layout_map *m;
    ASSERT_OK(tl_layout_map_create(tu_fx_mesh, mode, &m));
    ASSERT_OK(tl_layout_map_set(m, key, r1()));
    bool hit = get(m, path) != NULL;
    tl_layout_map_destroy(m);
    return hit;
}

static void assert_rejected(const char *key, const char *frag)
{
    tl_layout_map *m;
    ASSERT_OK(tl_layout_map_create(tu_fx_mesh, TL_MATCH_FULL, &m));
    ASSERT_ERR(tl_layout_map_set(m, key, r1()), TL_EINVAL, frag);
    cr_assert(strstr(tl_last_error(), key) != NULL, "the message names the key: %s", tl_last_error());
    tl_layout_map_destroy(m);
}

Test(layout_map, regex_classes_and_escapes)
{
    cr_assert(key_matches(TL_MATCH_FULL, "dense_\\d+/kernel", "dense_12/kernel"));
    cr_assert(!key_matches(TL_MATCH_FULL, "dense_\\d+/kernel", "dense_x/kernel"));
    cr_assert(key_matches(TL_MATCH_FULL, "\\w+/\\w+", "dense_1/kernel"));
    cr_assert(!key_matches(TL_MATCH_FULL, "\\w+", "a/b"));
    cr_assert(key_matches(TL_MATCH_FULL, "a\\sb", "a b"));
    cr_assert(key_matches(TL_MATCH_FULL, "a\\Sb", "a-b"));
    cr_assert(!key_matches(TL_MATCH_FULL, "a\\Db", "a1b"));
    cr_assert(key_matches(TL_MATCH_FULL, "a\\Wb", "a/b"));
    cr_assert(key_matches(TL_MATCH_FULL, "dense\\.kernel", "dense.kernel"));
    cr_assert(!key_matches(TL_MATCH_FULL, "dense\\.kernel", "dense/kernel"));
    cr_assert(key_matches(TL_MATCH_FULL, "a\\/b\\-c", "a/b-c"));
    cr_assert(key_matches(TL_MATCH_FULL, "[^/]+/kernel", "dense/kernel"));
    cr_assert(!key_matches(TL_MATCH_FULL, "[^/]+/kernel", "model/dense/kernel"));
    cr_assert(key_matches(TL_MATCH_FULL, "[\\d_a-c]+", "a_1b2c"));
    cr_assert(key_matches(TL_MATCH_FULL, "[]x]+", "]x]"));
    cr_assert(key_matches(TL_MATCH_FULL, "[a-]+", "a-a"));
    cr_assert(key_matches(TL_MATCH_FULL, "[\\^]", "^"));
    cr_assert(key_matches(TL_MATCH_FULL, "[-^]+", "^-"));
    cr_assert(key_matches(TL_MATCH_FULL, "[^^]", "x"));
    cr_assert(!key_matches(TL_MATCH_FULL, "[^^]", "^"));
    cr_assert(key_matches(TL_MATCH_FULL, "[[:]+", "[:"));
    cr_assert(key_matches(TL_MATCH_FULL, "[\\]\\[]+", "[]"));
}

Test(layout_map, regex_groups_repeats_and_anchors)
{
    cr_assert(key_matches(TL_MATCH_FULL, "(dense|conv)/kernel", "conv/kernel"));
    cr_assert(!key_matches(TL_MATCH_FULL, "dense|conv", "dense/x"));
    cr_assert(key_matches(TL_MATCH_SEARCH, "dense|conv", "my/conv_1"));
    cr_assert(key_matches(TL_MATCH_FULL, "a{2}", "aa"));
    cr_assert(!key_matches(TL_MATCH_FULL, "a{2}", "aaa"));
    cr_assert(key_matches(TL_MATCH_FULL, "a{,2}b", "b"));
    cr_assert(key_matches(TL_MATCH_FULL, "a{1,}", "aaaa"));
    cr_assert(key_matches(TL_MATCH_FULL, "a{,}", ""));
    cr_assert(key_matches(TL_MATCH_FULL, "a{x}", "a{x}"));
    cr_assert(key_matches(TL_MATCH_FULL, "a{}", "a{}"));
    cr_assert(key_matches(TL_MATCH_FULL, "x}", "x}"));
    cr_assert(key_matches(TL_MATCH_SEARCH, "^dense", "dense/kernel"));
    cr_assert(!key_matches(TL_MATCH_SEARCH, "^dense", "my/dense"));
    cr_assert(key_matches(TL_MATCH_SEARCH, "kernel$", "my/kernel"));
    cr_assert(key_matches(TL_MATCH_FULL, "", ""));
    cr_assert(!key_matches(TL_MATCH_FULL, "", "x"));
    cr_assert(key_matches(TL_MATCH_SEARCH, "", "anything"));
    cr_assert(key_matches(TL_MATCH_FULL, "a\\(b\\)\\*", "a(b)*"));
}

Test(layout_map, regex_unsupported_syntax_is_rejected)
{
    assert_rejected(".*?kernel", "lazy quantifier");
    assert_rejected("a+?", "lazy quantifier");
    assert_rejected("a??", "lazy quantifier");
    assert_rejected("a{1,2}?", "lazy quantifier");
    assert_rejected("a*+", "possessive quantifier");
    assert_rejected("a**", "multiple repeat");
    assert_rejected("(?:dense)/kernel", "'(?' groups");
    assert_rejected("dense(?=/kernel)", "'(?' groups");
    assert_rejected("(?<!x)y", "'(?' groups");
    assert_rejected("(?P<n>x)", "'(?' groups");
    assert_rejected("(?i)dense", "'(?' groups");
    assert_rejected("\\bdense", "the escape \\b is not supported");
    assert_rejected("dense\\Z", "the escape \\Z");
    assert_rejected("(a)\\1", "the escape \\1");
    assert_rejected("\\x41", "the escape \\x");
    assert_rejected("[\\D]", "negated class");
    assert_rejected("[\\x41]", "the escape \\x inside [...]");
    assert_rejected("[z-a]", "bad character range");
    assert_rejected("[\\d-z]", "bad character range");
    assert_rejected("*a", "nothing to repeat");
    assert_rejected("a|*", "nothing to repeat");
    assert_rejected("^*", "nothing to repeat");
    assert_rejected("(a", "missing ), unterminated subpattern");
    assert_rejected("a)", "unbalanced parenthesis");
    assert_rejected("a\\", "bad escape (end of pattern)");
    assert_rejected("a{3,1}", "min repeat greater than max repeat");
    assert_rejected("[\xc3\xa9]", "non-ASCII");
    assert_rejected("a{99999}", "is not a supported regular expression");
}

/* ---- allocation failures ------------------------------------------------ */

/* A map on the mesh ctx given one key: the insertion is all or nothing. */
static tl_status map_with_one_key(void *ctx)
{
    tl_layout_map *m;
    tl_status st = tl_layout_map_create(ctx, TL_MATCH_FULL, &m);
    if (st != TL_OK)
        return st;
    /* the map grows its table on the first insert, so this covers
     * the table, the key, the compiled pattern and the layout */
    st = tl_layout_map_set_axes(m, ".*dense_\\d+/kernel", (const char *[]){NULL, "model"}, 2);
    if (st == TL_OK)
        cr_assert(get(m, "a/dense_3/kernel") != NULL);
    else
        cr_assert_eq(tl_layout_map_size(m), 0);
    tl_layout_map_destroy(m);
    return st;
}

static tl_status map_create(void *ctx)
{
    tl_layout_map *m;
    tl_status st = tl_layout_map_create(ctx, TL_MATCH_SEARCH, &m);
    if (st == TL_OK)
        tl_layout_map_destroy(m);
    return st;
}

Test(layout_map, oom_set_unwinds)
{
    long create = tu_oom_sweep(map_create, tu_fx_mesh, "tl_layout_map_create");
    cr_assert_eq(create, 1);
    long set = tu_oom_sweep(map_with_one_key, tu_fx_mesh, "tl_layout_map_set_axes") - create;
    cr_assert_gt(set, 4);
}
