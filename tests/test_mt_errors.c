/* The thread-local last error under concurrency (a ThreadSanitizer target). */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "tpuloop/tpuloop.h"

static void *set_errors(void *arg)
{
    int id = (int)(intptr_t)arg;
    char want[64];
    snprintf(want, sizeof want, "num_shards must be positive, got -%d", id + 1);
    for (int i = 0; i < 200; i++) {
        tl_config *cfg;
        if (tl_config_create(&cfg) != TL_OK)
            return (void *)1;
        char text[16];
        snprintf(text, sizeof text, "-%d", id + 1);
        tl_config_set(cfg, "num_shards", text, TL_SOURCE_FLAG);
        tl_status st = tl_config_resolve(cfg);
        tl_config_destroy(cfg);
        if (st != TL_EINVAL || strstr(tl_last_error(), want) == NULL)
            return (void *)1;
    }
    return NULL;
}

Test(mt_errors, last_error_is_per_thread_under_load)
{
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        cr_assert_eq(pthread_create(&t[i], NULL, set_errors, (void *)(intptr_t)i), 0);
    for (int i = 0; i < 4; i++) {
        void *rv;
        pthread_join(t[i], &rv);
        cr_assert_null(rv, "thread %d saw another thread's error", i);
    }
}
