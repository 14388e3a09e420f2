/* MPI profiling-interface wrappers for tests/test_kernels_build_run.py: linked
 * into a kernel, they remember the last communication call of the process and
 * MPI_Finalize prints it on stderr, one line per rank:
 *
 *     pmpi: rank 1 entered MPI_Finalize after MPI_Barrier
 *
 * Covers every communication call of src/ (asserted by the test). */
#include <mpi.h>
#include <stdio.h>

static const char *last_call = "nothing";

#define REMEMBER(name) (last_call = #name)

int MPI_Send(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm)
{
    REMEMBER(MPI_Send);
    return PMPI_Send(buf, count, type, dest, tag, comm);
}

int MPI_Recv(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm, MPI_Status *status)
{
    REMEMBER(MPI_Recv);
    return PMPI_Recv(buf, count, type, source, tag, comm, status);
}

int MPI_Isend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm, MPI_Request *req)
{
    REMEMBER(MPI_Isend);
    return PMPI_Isend(buf, count, type, dest, tag, comm, req);
}

int MPI_Irecv(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm, MPI_Request *req)
{
    REMEMBER(MPI_Irecv);
    return PMPI_Irecv(buf, count, type, source, tag, comm, req);
}

int MPI_Wait(MPI_Request *req, MPI_Status *status)
{
    REMEMBER(MPI_Wait);
    return PMPI_Wait(req, status);
}

int MPI_Waitall(int count, MPI_Request reqs[], MPI_Status statuses[])
{
    REMEMBER(MPI_Waitall);
    return PMPI_Waitall(count, reqs, statuses);
}

int MPI_Test(MPI_Request *req, int *flag, MPI_Status *status)
{
    REMEMBER(MPI_Test);
    return PMPI_Test(req, flag, status);
}

int MPI_Barrier(MPI_Comm comm)
{
    REMEMBER(MPI_Barrier);
    return PMPI_Barrier(comm);
}

int MPI_Ibarrier(MPI_Comm comm, MPI_Request *req)
{
    REMEMBER(MPI_Ibarrier);
    return PMPI_Ibarrier(comm, req);
}

int MPI_Bcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm)
{
    REMEMBER(MPI_Bcast);
    return PMPI_Bcast(buf, count, type, root, comm);
}

int MPI_Reduce(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op, int root, MPI_Comm comm)
{
    REMEMBER(MPI_Reduce);
    return PMPI_Reduce(sbuf, rbuf, count, type, op, root, comm);
}

int MPI_Allreduce(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm)
{
    REMEMBER(MPI_Allreduce);
    return PMPI_Allreduce(sbuf, rbuf, count, type, op, comm);
}

int MPI_Gather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype,
               int root, MPI_Comm comm)
{
    REMEMBER(MPI_Gather);
    return PMPI_Gather(sbuf, scount, stype, rbuf, rcount, rtype, root, comm);
}

int MPI_Allgather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype,
                  MPI_Comm comm)
{
    REMEMBER(MPI_Allgather);
    return PMPI_Allgather(sbuf, scount, stype, rbuf, rcount, rtype, comm);
}

int MPI_Alltoall(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype,
                 MPI_Comm comm)
{
    REMEMBER(MPI_Alltoall);
    return PMPI_Alltoall(sbuf, scount, stype, rbuf, rcount, rtype, comm);
}

int MPI_Reduce_scatter_block(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm)
{
    REMEMBER(MPI_Reduce_scatter_block);
    return PMPI_Reduce_scatter_block(sbuf, rbuf, count, type, op, comm);
}

int MPI_Finalize(void)
{
    int rank = -1;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    fprintf(stderr, "pmpi: rank %d entered MPI_Finalize after %s\n", rank, last_call);
    fflush(stderr);
    return PMPI_Finalize();
}
