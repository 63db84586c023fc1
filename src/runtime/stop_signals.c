/* stop_signals.c — a graceful stop on SIGINT and SIGTERM around a train
 * call (tl_estimator_stop_signals_install): what `tpuloop train` and the
 * Python package do, so that Ctrl-C or a supervisor's SIGTERM stops at the
 * next loop boundary after a checkpoint and loses nothing. */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "estimator_int.h"

/* A signal handler reaches only what is global: the estimator to stop, set
 * while a train call runs, how many handlers are inside it now (the handler
 * may run on any thread, so clearing the target is not enough:
 * handlers_running lets the clearing side wait out one that loaded it
 * before), and the last signal caught. All are lock-free atomics, which are
 * async-signal-safe. */
static _Atomic(tl_estimator *) stop_target;
static atomic_int handlers_running;
static atomic_int caught;

static struct sigaction old_int, old_term;
static bool have_int, have_term;
static atomic_bool installed;

static void on_stop_signal(int sig)
{
    int saved_errno = errno;
    atomic_fetch_add(&handlers_running, 1);
    tl_estimator *est = atomic_load(&stop_target);
    if (est != NULL) {
        tl_estimator_request_stop(est);
        atomic_store(&caught, sig);
        static const char term[] = "\ntpuloop: SIGTERM: stopping at the next loop boundary\n";
        static const char intr[] = "\ntpuloop: SIGINT: stopping at the next loop boundary "
                                   "(press Ctrl-C again to quit at once)\n";
        ssize_t n = sig == SIGINT ? write(STDERR_FILENO, intr, sizeof intr - 1)
                                  : write(STDERR_FILENO, term, sizeof term - 1);
        (void)n;
    }
    atomic_fetch_sub(&handlers_running, 1);
    errno = saved_errno;
}

/* Installs the handler for sig unless the signal is ignored (a job started
 * in the background by a non-interactive shell ignores SIGINT, and should go
 * on ignoring it). */
static bool install_one(int sig, int flags, struct sigaction *old)
{
    if (sigaction(sig, NULL, old) != 0 || old->sa_handler == SIG_IGN)
        return false;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sigaddset(&sa.sa_mask, SIGINT);
    sigaddset(&sa.sa_mask, SIGTERM);
    /* SA_RESTART: a checkpoint's write or fsync on the thread that takes the
     * signal must not fail with EINTR. */
    sa.sa_flags = SA_RESTART | flags;
    return sigaction(sig, &sa, NULL) == 0;
}

tl_status tl_estimator_stop_signals_install(tl_estimator *est)
{
    if (est == NULL)
        return tl_error(TL_EINVAL, "tl_estimator_stop_signals_install: est is NULL");
    if (atomic_exchange(&installed, true))
        return tl_error(TL_EBUSY, "tl_estimator_stop_signals_install: the stop handlers are installed already "
                                  "(one train call at a time per process)");
    atomic_store(&caught, 0);
    atomic_store(&stop_target, est);
    /* SA_RESETHAND: the first SIGINT asks for a graceful stop and restores
     * the default action, so a second one quits at once. SIGTERM always asks
     * (a supervisor escalates to SIGKILL by itself). */
    have_int = install_one(SIGINT, SA_RESETHAND, &old_int);
    have_term = install_one(SIGTERM, 0, &old_term);
    return TL_OK;
}

int tl_estimator_stop_signals_remove(void)
{
    if (!atomic_load(&installed))
        return 0;
    if (have_int)
        sigaction(SIGINT, &old_int, NULL);
    if (have_term)
        sigaction(SIGTERM, &old_term, NULL);
    atomic_store(&stop_target, NULL);
    while (atomic_load(&handlers_running) > 0)
        sched_yield();
    atomic_store(&installed, false);
    return atomic_exchange(&caught, 0);
}
