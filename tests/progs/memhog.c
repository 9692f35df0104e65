/* SPDX-License-Identifier: GPL-2.0 */
/*
 * nimble-memhog: a process whose threads work on memory of one node, for
 * numa_memory.sh.
 *
 *   nimble-memhog --threads T --mb M --touch CPUS --start CPUS --free-after-ms MS
 *
 * Touches M MiB while bound to the CPUs --touch lists (first touch puts the
 * pages on their node), starts T threads reading it in a loop, binds them
 * to the --start CPUs (another node: the memory is now remote), and after
 * MS ms lets every thread run on any CPU, or at once on SIGUSR1 (two
 * processes freed together: "MEMHOG ready" says the threads are started
 * and bound). Prints "MEMHOG free" when it has, then sleeps until killed.
 * CPUS: a list as in cpulist files ("4-7,9"). --start any: the process
 * unbinds itself after the touch and starts its threads free, as a program
 * that allocates, then starts workers (autonuma's numa01): the scheduler
 * places them.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "cpulist.h"

#define MAX_THREADS 64

static volatile unsigned char *buf;
static size_t len;

/* SIGUSR1 only cuts the wait short (no SA_RESTART: nanosleep returns). */
static void on_usr1(int sig)
{
	(void)sig;
}

static void *reader(void *arg)
{
	unsigned long sum = 0;
	size_t i;

	(void)arg;
	for (;;)
		for (i = 0; i < len; i += 64)
			sum += buf[i];
	return (void *)sum;
}

int main(int argc, char **argv)
{
	const char *touch = NULL, *start = NULL;
	long threads = 2, mb = 64, free_ms = 1000, i;
	pthread_t tid[MAX_THREADS];
	cpu_set_t set, run, all;

	for (i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--threads"))
			threads = atol(argv[i + 1]);
		else if (!strcmp(argv[i], "--mb"))
			mb = atol(argv[i + 1]);
		else if (!strcmp(argv[i], "--touch"))
			touch = argv[i + 1];
		else if (!strcmp(argv[i], "--start"))
			start = argv[i + 1];
		else if (!strcmp(argv[i], "--free-after-ms"))
			free_ms = atol(argv[i + 1]);
		else
			break;
	}
	if (i != argc || !touch || !start || threads < 1 || threads > MAX_THREADS || mb < 1) {
		fprintf(stderr, "usage: nimble-memhog --threads T --mb M --touch CPUS "
			"--start CPUS|any --free-after-ms MS\n");
		return 2;
	}
	if (sched_getaffinity(0, sizeof(all), &all)) {
		perror("sched_getaffinity");
		return 1;
	}
	if (!strcmp(start, "any"))
		run = all;
	else if (parse_cpus(start, &run)) {
		fprintf(stderr, "nimble-memhog: bad CPU list\n");
		return 2;
	}
	if (parse_cpus(touch, &set)) {
		fprintf(stderr, "nimble-memhog: bad CPU list\n");
		return 2;
	}
	if (sched_setaffinity(0, sizeof(set), &set)) {
		perror("sched_setaffinity --touch");
		return 1;
	}
	len = (size_t)mb << 20;
	buf = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (buf == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	memset((void *)buf, 1, len);
	/* Threads inherit the affinity: unbound before they start. */
	if (!strcmp(start, "any") && sched_setaffinity(0, sizeof(all), &all)) {
		perror("sched_setaffinity");
		return 1;
	}
	for (i = 0; i < threads; i++) {
		if (pthread_create(&tid[i], NULL, reader, NULL)) {
			fprintf(stderr, "nimble-memhog: pthread_create failed\n");
			return 1;
		}
		if (pthread_setaffinity_np(tid[i], sizeof(run), &run)) {
			fprintf(stderr, "nimble-memhog: binding to --start failed\n");
			return 1;
		}
	}
	{
		struct sigaction sa = { .sa_handler = on_usr1 };
		struct timespec ts = { free_ms / 1000, (free_ms % 1000) * 1000000L };

		sigaction(SIGUSR1, &sa, NULL);
		printf("MEMHOG ready\n");
		fflush(stdout);
		nanosleep(&ts, NULL);
	}
	for (i = 0; i < threads; i++)
		pthread_setaffinity_np(tid[i], sizeof(all), &all);
	printf("MEMHOG free\n");
	fflush(stdout);
	for (;;)
		pause();
}
