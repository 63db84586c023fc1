/* hosts.c — the command on several hosts: started by mpirun (or srun, or
 * any launcher of MPI processes) each process is one host; started alone
 * it is the only one and MPI is never initialised, so a plain `tpuloop
 * train` needs no MPI daemon. Host 0 prints what a one-host run prints;
 * every host prints its warnings and errors, tagged with the job and host. */
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"

static tl_comm *hosts;
static int host, nhosts = 1;
static char tag[96];

/* Whether an MPI launcher started this process: Open MPI's mpirun, PMIx
 * (Open MPI 4+, Slurm's srun --mpi=pmix) or PMI (MPICH, srun --mpi=pmi2). */
static bool launched(void)
{
    return getenv("OMPI_COMM_WORLD_SIZE") != NULL || getenv("PMIX_RANK") != NULL || getenv("PMI_RANK") != NULL;
}

static void log_handler(tl_log_level level, const char *msg, void *ud)
{
    static const char levels[] = "DIWE";
    (void)ud;
    fprintf(stderr, "%c tpuloop[%s]: %s\n", levels[level < TL_LOG_OFF ? level : TL_LOG_ERROR], tag, msg);
}

tl_status cli_hosts_join(void)
{
    if (hosts != NULL || !launched())
        return TL_OK;
    tl_status st = tl_comm_create_mpi(NULL, 1, &hosts);
    if (st != TL_OK)
        return st;
    host = tl_comm_process(hosts);
    nhosts = tl_comm_processes(hosts);
    cli_hosts_name(NULL);
    return TL_OK;
}

void cli_hosts_abort(tl_status st, const char *msg)
{
    /* The others may be waiting for this host in a collective: they fail
     * with this message, naming this process, and no process waits in
     * MPI_Finalize for another that never comes (comm.h). */
    if (hosts != NULL && tl_comm_status(hosts) == TL_OK)
        tl_comm_abort(hosts, st, msg);
}

void cli_hosts_name(const char *job_name)
{
    if (nhosts == 1)
        return;
    snprintf(tag, sizeof tag, "%s/host %d of %d", job_name != NULL ? job_name : "tpu_worker", host, nhosts);
    tl_set_log_handler(log_handler, NULL);
}

tl_comm *cli_hosts(void)
{
    return hosts;
}

int cli_hosts_count(void)
{
    return nhosts;
}

bool cli_host0(void)
{
    return host == 0;
}

const char *cli_hosts_tag(void)
{
    return nhosts > 1 ? tag : NULL;
}
