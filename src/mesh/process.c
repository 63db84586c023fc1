/* process.c — Keras' initialize(): the environment fallback for the job
 * addresses, process count and process id, and the JAX backend's checks on
 * them. The distributed runtime itself (MPI) is started elsewhere. */
#include <limits.h>
#include <string.h>

#include "mesh_int.h"

#define ENV_JOB_ADDRESSES "KERAS_DISTRIBUTION_JOB_ADDRESSES"
#define ENV_NUM_PROCESSES "KERAS_DISTRIBUTION_NUM_PROCESSES"
#define ENV_PROCESS_ID "KERAS_DISTRIBUTION_PROCESS_ID"

/* The value of name in envp, or NULL when the variable is absent. */
static const char *env_get(const char *const *envp, const char *name)
{
    size_t len = strlen(name);
    for (const char *const *e = envp; e != NULL && *e != NULL; e++)
        if (strncmp(*e, name, len) == 0 && (*e)[len] == '=')
            return *e + len + 1;
    return NULL;
}

/* Python's int(value) for an environment variable, strict: an optional sign
 * and decimal digits. */
static tl_status env_int(const char *const *envp, const char *name, int *out)
{
    const char *v = env_get(envp, name);
    if (v == NULL)
        return TL_OK;
    int64_t x = 0;
    int rc = tl_parse_int64(v, &x);
    if (rc == -1)
        return tl_error(TL_EINVAL, "invalid literal for int() with base 10: '%s' (%s)", v, name);
    if (rc != 0 || x < INT_MIN || x > INT_MAX)
        return tl_error(TL_EINVAL, "%s=%s is out of range for an int", name, v);
    *out = (int)x;
    return TL_OK;
}

tl_status tl_initialize_resolve(const char *job_addresses, int num_processes, int process_id,
                                const char *const *envp, tl_init_request *out)
{
    *out = (tl_init_request){NULL, -1, -1};
    if (num_processes < -1)
        return tl_error(TL_EINVAL, "num_processes must be -1 (None) or >= 0, got %d", num_processes);
    if (process_id < -1)
        return tl_error(TL_EINVAL, "process_id must be -1 (None) or >= 0, got %d", process_id);
    tl_init_request r = {job_addresses, num_processes, process_id};
    if (r.job_addresses == NULL)
        r.job_addresses = env_get(envp, ENV_JOB_ADDRESSES);
    tl_status st = TL_OK;
    if (r.num_processes == -1 && (st = env_int(envp, ENV_NUM_PROCESSES, &r.num_processes)) != TL_OK)
        return st;
    if (r.process_id == -1 && (st = env_int(envp, ENV_PROCESS_ID, &r.process_id)) != TL_OK)
        return st;
    *out = r;
    return TL_OK;
}

/* "['10.0.0.1:1234', '10.0.0.2:2345']": Python's repr of the split list. */
static void addresses_repr(tl_sink *s, const char *addrs)
{
    tl_sink_puts(s, "[");
    for (const char *p = addrs;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma != NULL ? (size_t)(comma - p) : strlen(p);
        tl_sink_printf(s, "'%.*s'", (int)len, p);
        if (comma == NULL)
            break;
        tl_sink_puts(s, ", ");
        p = comma + 1;
    }
    tl_sink_puts(s, "]");
}

tl_status tl_initialize(const char *job_addresses, int num_processes, int process_id,
                        const char *const *envp, tl_process *out, char *coordinator, size_t n)
{
    *out = (tl_process){1, 0};
    if (coordinator != NULL && n > 0)
        coordinator[0] = '\0';
    tl_init_request r;
    tl_status st = tl_initialize_resolve(job_addresses, num_processes, process_id, envp, &r);
    if (st != TL_OK)
        return st;

    const char *coord = r.job_addresses != NULL ? r.job_addresses : "";
    size_t coord_len = strlen(coord);
    if (coord[0] != '\0' && strchr(coord, ',') != NULL) {
        int jobs = 1;
        for (const char *p = coord; *p; p++)
            jobs += *p == ',';
        if (r.num_processes != -1 && jobs != r.num_processes) {
            char list[768];
            tl_sink s = tl_sink_make(list, sizeof list);
            addresses_repr(&s, coord);
            return tl_error(TL_EINVAL, "The provided job_addresses %s has %d jobs, but num_processes is %d", list,
                            jobs, r.num_processes);
        }
        coord_len = (size_t)(strchr(coord, ',') - coord);
    }

    tl_process p = {r.num_processes == -1 ? 1 : r.num_processes, r.process_id == -1 ? 0 : r.process_id};
    if (p.num_processes < 1)
        return tl_error(TL_EINVAL, "num_processes must be >= 1, got %d", p.num_processes);
    if (p.process_id >= p.num_processes)
        return tl_error(TL_EINVAL, "process_id must be in [0, %d) for num_processes=%d, got %d", p.num_processes,
                        p.num_processes, p.process_id);
    if (coordinator != NULL) {
        if (coord_len >= n)
            return tl_error(TL_EINVAL, "the coordinator address '%.*s' needs %zu bytes; the buffer has %zu",
                            (int)coord_len, coord, coord_len + 1, n);
        memcpy(coordinator, coord, coord_len);
        coordinator[coord_len] = '\0';
    }
    *out = p;
    return TL_OK;
}
