/*
 * mpi-check: a small MPI program for the tests and the benchmark, built twice by
 * e2e/images.sh (with MPICH's and with Open MPI's mpicc) into the MPI image.
 *
 *   mpi-check            every rank prints "rank R of N on HOST"; a token goes once round
 *                        the ring (each rank adds its rank); an MPI_Allreduce sums the ranks;
 *                        rank 0 prints "mpi-check ok: size N, ring S, allreduce S, hosts H"
 *                        when both sums are N(N-1)/2, and the program exits 1 otherwise.
 *   mpi-check pingpong [ITERATIONS]
 *                        ranks 0 and 1 send messages back and forth (8 bytes, then 1 MiB);
 *                        rank 0 prints "pingpong latency_us L bandwidth_MBps B hosts H0,H1".
 *   mpi-check abort CODE after a barrier, the last rank prints "mpi-check aborting with CODE"
 *                        and calls MPI_Abort(MPI_COMM_WORLD, CODE) while the others wait in
 *                        a second barrier: a solver that gives up, as the tests of a failed
 *                        job's end need one.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define HOST_MAX 256

static void hosts_of(int rank, int size, char *joined, size_t cap) {
    char host[HOST_MAX] = {0};
    gethostname(host, sizeof host - 1);
    char *all = rank == 0 ? calloc((size_t)size, HOST_MAX) : NULL;
    MPI_Gather(host, HOST_MAX, MPI_CHAR, all, HOST_MAX, MPI_CHAR, 0, MPI_COMM_WORLD);
    if (rank != 0)
        return;
    joined[0] = '\0';
    for (int r = 0; r < size; r++) {
        const char *h = all + (size_t)r * HOST_MAX;
        /* each host once, in rank order */
        int seen = 0;
        for (int q = 0; q < r; q++)
            seen |= strcmp(all + (size_t)q * HOST_MAX, h) == 0;
        if (seen)
            continue;
        if (joined[0] != '\0')
            strncat(joined, ",", cap - strlen(joined) - 1);
        strncat(joined, h, cap - strlen(joined) - 1);
    }
    free(all);
}

static int check(int rank, int size) {
    char host[HOST_MAX] = {0};
    gethostname(host, sizeof host - 1);
    printf("rank %d of %d on %s\n", rank, size, host);
    fflush(stdout);

    long token = 0;
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    if (rank == 0) {
        if (size > 1) {
            MPI_Send(&token, 1, MPI_LONG, next, 0, MPI_COMM_WORLD);
            MPI_Recv(&token, 1, MPI_LONG, prev, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        }
    } else {
        MPI_Recv(&token, 1, MPI_LONG, prev, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        token += rank;
        MPI_Send(&token, 1, MPI_LONG, next, 0, MPI_COMM_WORLD);
    }
    long mine = rank, sum = 0;
    MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);

    char hosts[4096];
    hosts_of(rank, size, hosts, sizeof hosts);
    long want = (long)size * (size - 1) / 2;
    if (rank == 0) {
        int ok = token == want && sum == want;
        printf("mpi-check %s: size %d, ring %ld, allreduce %ld, hosts %s\n",
               ok ? "ok" : "FAILED", size, token, sum, hosts);
        fflush(stdout);
        return ok ? 0 : 1;
    }
    return sum == want ? 0 : 1;
}

/* Seconds per round trip of `bytes`, over `iterations` after 10 warm-up trips. */
static double round_trip(int rank, char *buf, int bytes, int iterations) {
    double start = 0;
    for (int i = -10; i < iterations; i++) {
        if (i == 0) {
            MPI_Barrier(MPI_COMM_WORLD);
            start = MPI_Wtime();
        }
        if (rank == 0) {
            MPI_Send(buf, bytes, MPI_CHAR, 1, 1, MPI_COMM_WORLD);
            MPI_Recv(buf, bytes, MPI_CHAR, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else if (rank == 1) {
            MPI_Recv(buf, bytes, MPI_CHAR, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(buf, bytes, MPI_CHAR, 0, 1, MPI_COMM_WORLD);
        }
    }
    return (MPI_Wtime() - start) / iterations;
}

static int pingpong(int rank, int size, int iterations) {
    if (size < 2) {
        if (rank == 0)
            fprintf(stderr, "mpi-check pingpong: needs 2 ranks, has %d\n", size);
        return 1;
    }
    const int big = 1 << 20;
    char *buf = calloc(1, big);
    double small_s = round_trip(rank, buf, 8, iterations);
    double big_s = round_trip(rank, buf, big, iterations / 10 + 1);
    free(buf);
    char hosts[4096];
    hosts_of(rank, size, hosts, sizeof hosts);
    if (rank == 0) {
        printf("pingpong latency_us %.2f bandwidth_MBps %.1f hosts %s\n", small_s / 2 * 1e6,
               2.0 * big / big_s / 1e6, hosts);
        fflush(stdout);
    }
    return 0;
}

static int abort_with(int rank, int size, int code) {
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == size - 1) {
        printf("mpi-check aborting with %d\n", code);
        fflush(stdout);
        MPI_Abort(MPI_COMM_WORLD, code);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    return 0;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int rc;
    if (argc > 2 && strcmp(argv[1], "abort") == 0)
        rc = abort_with(rank, size, atoi(argv[2]));
    else if (argc > 1 && strcmp(argv[1], "pingpong") == 0)
        rc = pingpong(rank, size, argc > 2 ? atoi(argv[2]) : 1000);
    else
        rc = check(rank, size);
    MPI_Finalize();
    return rc;
}
