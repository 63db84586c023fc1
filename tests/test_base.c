/*
 * test_base.c — status codes, their names and messages, the input/machine
 * split, and the thread-local last error.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "base/base_int.h"
#include "tpuloop/config.h"

typedef struct status_row {
    tl_status st;
    const char *name;
    const char *msg;
    int value;
    bool input_error;
} status_row;

static const status_row statuses[] = {
    {TL_OK, "TL_OK", "success", 0, false},
    {TL_EINVAL, "TL_EINVAL", "invalid value", -1, true},
    {TL_ETYPE, "TL_ETYPE", "wrong type", -2, true},
    {TL_ERUNTIME, "TL_ERUNTIME", "runtime error", -3, true},
    {TL_ENOTFOUND, "TL_ENOTFOUND", "not found", -4, true},
    {TL_ENOTIMPL, "TL_ENOTIMPL", "not implemented", -5, false},
    {TL_ENOMEM, "TL_ENOMEM", "out of memory", -6, false},
    {TL_EIO, "TL_EIO", "input/output error", -7, false},
    {TL_EPARSE, "TL_EPARSE", "malformed input", -8, true},
    {TL_EUNKNOWN, "TL_EUNKNOWN", "unknown option", -9, true},
    {TL_EBUSY, "TL_EBUSY", "resource busy", -10, false},
};

#define NSTATUS (sizeof statuses / sizeof statuses[0])

Test(status, values_are_fixed)
{
    /* Values are append-only: a renumbering breaks every caller's ABI. */
    for (size_t i = 0; i < NSTATUS; i++)
        cr_assert_eq((int)statuses[i].st, statuses[i].value, "%s is %d, want %d", statuses[i].name,
                     (int)statuses[i].st, statuses[i].value);
}

Test(status, ok_is_zero_and_errors_negative_and_distinct)
{
    cr_assert_eq((int)TL_OK, 0, "TL_OK is 0");
    for (size_t i = 1; i < NSTATUS; i++) {
        cr_assert_lt((int)statuses[i].st, 0, "%s must be negative", statuses[i].name);
        for (size_t j = 0; j < i; j++)
            cr_assert_neq(statuses[i].st, statuses[j].st, "%s and %s share a value", statuses[i].name,
                          statuses[j].name);
    }
}

Test(status, names)
{
    for (size_t i = 0; i < NSTATUS; i++)
        cr_assert_str_eq(tl_err_name(statuses[i].st), statuses[i].name, "tl_err_name(%d)", (int)statuses[i].st);
}

Test(status, messages)
{
    for (size_t i = 0; i < NSTATUS; i++)
        cr_assert_str_eq(tl_strerror(statuses[i].st), statuses[i].msg, "tl_strerror(%s)", statuses[i].name);
}

Test(status, unknown_values)
{
    static const int unknown[] = {1, 2, -11, -100, 42, -2147483647};
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        tl_status st = (tl_status)unknown[i];
        cr_assert_not_null(tl_strerror(st), "tl_strerror(%d) is NULL", unknown[i]);
        cr_assert_str_eq(tl_strerror(st), "unknown status", "tl_strerror(%d)", unknown[i]);
        cr_assert_not_null(tl_err_name(st), "tl_err_name(%d) is NULL", unknown[i]);
        cr_assert_str_eq(tl_err_name(st), "TL_UNKNOWN_STATUS", "tl_err_name(%d)", unknown[i]);
        cr_assert_not(tl_status_is_input_error(st), "%d is not an input error", unknown[i]);
    }
}

Test(status, input_errors_versus_machine_failures)
{
    cr_assert_not(tl_status_is_input_error(TL_OK), "TL_OK is no error");
    cr_assert_not(tl_status_is_input_error(TL_ENOMEM), "out of memory is the machine's failure");
    cr_assert_not(tl_status_is_input_error(TL_EIO), "I/O is the machine's failure");
    static const tl_status input[] = {TL_EINVAL, TL_ETYPE, TL_ERUNTIME, TL_ENOTFOUND, TL_EPARSE, TL_EUNKNOWN};
    for (size_t i = 0; i < sizeof input / sizeof input[0]; i++)
        cr_assert(tl_status_is_input_error(input[i]), "%s is an input error", tl_err_name(input[i]));
}

Test(status, version)
{
    char v[32];
    snprintf(v, sizeof v, "%d.%d.%d", TL_VERSION_MAJOR, TL_VERSION_MINOR, TL_VERSION_PATCH);
    cr_assert_str_eq(v, TL_VERSION_STRING, "TL_VERSION_STRING matches the numbers");
}

/* ---- the thread's last error -------------------------------------------- */

Test(last_error, empty_before_any_failure)
{
    cr_assert_str_eq(tl_last_error(), "", "fresh thread");
    cr_assert_eq(tl_last_status(), TL_OK, "fresh thread status");
}

Test(last_error, set_by_a_failing_call_and_kept_by_a_succeeding_one)
{
    tl_ipl ipl;
    cr_assert_eq(tl_parse_iterations_per_loop("0", &ipl), TL_EINVAL, "\"0\" rejected");
    cr_assert_not_null(strstr(tl_last_error(), "must be positive"), "message: %s", tl_last_error());
    cr_assert_eq(tl_last_status(), TL_EINVAL, "last status");
    cr_assert_eq(tl_parse_iterations_per_loop("5", &ipl), TL_OK, "\"5\" accepted");
    cr_assert_not_null(strstr(tl_last_error(), "must be positive"), "a success keeps the last error: %s",
                       tl_last_error());
    cr_assert_eq(tl_last_status(), TL_EINVAL, "a success keeps the last status");
}

Test(last_error, clear)
{
    tl_ipl ipl;
    cr_assert_eq(tl_parse_iterations_per_loop("x", &ipl), TL_EINVAL, "\"x\" rejected");
    tl_clear_error();
    cr_assert_str_eq(tl_last_error(), "", "cleared message");
    cr_assert_eq(tl_last_status(), TL_OK, "cleared status");
}

Test(last_error, replaced_by_the_next_failure)
{
    tl_ipl ipl;
    tl_config *cfg = NULL;
    cr_assert_eq(tl_parse_iterations_per_loop("0", &ipl), TL_EINVAL, "\"0\" rejected");
    cr_assert_eq(tl_config_create(&cfg), TL_OK, "create");
    cr_assert_eq(tl_config_set(cfg, "zz_unknown", "1", TL_SOURCE_FLAG), TL_EUNKNOWN, "unknown option");
    cr_assert_not_null(strstr(tl_last_error(), "zz_unknown"), "message: %s", tl_last_error());
    cr_assert_null(strstr(tl_last_error(), "iterations_per_loop"), "old message left: %s", tl_last_error());
    cr_assert_eq(tl_last_status(), TL_EUNKNOWN, "last status");
    tl_config_destroy(cfg);
}

typedef struct thread_report {
    char before[256];
    tl_status status_before;
    tl_status got;
    char after[1024];
    tl_status status_after;
} thread_report;

static void *thread_main(void *arg)
{
    thread_report *r = arg;
    snprintf(r->before, sizeof r->before, "%s", tl_last_error());
    r->status_before = tl_last_status();
    tl_config *cfg = NULL;
    r->got = tl_config_create(&cfg);
    if (r->got == TL_OK)
        r->got = tl_config_set(cfg, "thread_only_option", "1", TL_SOURCE_FLAG);
    tl_config_destroy(cfg);
    snprintf(r->after, sizeof r->after, "%s", tl_last_error());
    r->status_after = tl_last_status();
    return NULL;
}

Test(last_error, is_thread_local)
{
    tl_ipl ipl;
    cr_assert_eq(tl_parse_iterations_per_loop("01", &ipl), TL_EINVAL, "\"01\" rejected");
    char mine[1024];
    snprintf(mine, sizeof mine, "%s", tl_last_error());

    thread_report r;
    memset(&r, 0, sizeof r);
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, thread_main, &r), 0, "pthread_create");
    cr_assert_eq(pthread_join(t, NULL), 0, "pthread_join");

    cr_assert_str_eq(r.before, "", "a new thread starts without the main thread's error");
    cr_assert_eq(r.status_before, TL_OK, "a new thread starts with TL_OK");
    cr_assert_eq(r.got, TL_EUNKNOWN, "the thread's call failed with %s", tl_err_name(r.got));
    cr_assert_not_null(strstr(r.after, "thread_only_option"), "the thread's own message: %s", r.after);
    cr_assert_eq(r.status_after, TL_EUNKNOWN, "the thread's own status");

    cr_assert_str_eq(tl_last_error(), mine, "the thread's failure changed the main thread's message");
    cr_assert_eq(tl_last_status(), TL_EINVAL, "the thread's failure changed the main thread's status");
}

/* A caller may wrap the detail of a lower call in its own context, passing
 * tl_last_error() itself as an argument. */
Test(base, error_can_wrap_the_last_error)
{
    tl_error(TL_EINVAL, "num_shards must be positive, got %d", 0);
    cr_assert_eq(tl_error(TL_EINVAL, "model_fn (train): %s", tl_last_error()), TL_EINVAL);
    cr_assert_str_eq(tl_last_error(), "model_fn (train): num_shards must be positive, got 0");
}
