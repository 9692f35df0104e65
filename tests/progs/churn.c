/* SPDX-License-Identifier: GPL-2.0 */
/*
 * nimble-churn: attribute changes at a steady pace, for weights_churn.sh.
 * Every PERIOD ms, swaps the PIDs' nice values between two levels (the
 * first half takes NICE_A and the second NICE_B, then the other way round).
 * A second thread moves them, one at a time and in turn, to the other of
 * their two cgroups, also every PERIOD ms or as fast as the kernel allows:
 * PID i lives in DIR_A or DIR_B with %d replaced by i. A move waits for an
 * RCU grace period (the cgroup threadgroup lock), 30-60 ms in a loaded TCG
 * guest; in the renicing thread it held the renices to one per 60 ms. A
 * shell doing the same forks a renice per step, a tenth of a second each
 * there.
 *
 *   nimble-churn --period-ms P --secs S --nice A,B --cgroups DIR_A,DIR_B PID...
 *
 * Prints "CHURN steps=N moves=M" at the end; exits non-zero if a move or a renice
 * failed (the steps are the syscalls' own successes, which the guest script
 * checks from outside in /proc/PID/cgroup and /proc/PID/stat).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <pthread.h>
#include <unistd.h>

#define MAX_PIDS 64

static void usage(void)
{
	fprintf(stderr, "usage: nimble-churn --period-ms P --secs S --nice A,B --cgroups DIR,DIR PID...\n");
	exit(2);
}

static int move(const char *pattern, int i, int pid)
{
	char dir[400], path[512];
	FILE *f;
	int ok;

	snprintf(dir, sizeof(dir), pattern, i);
	snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
	f = fopen(path, "w");
	if (!f)
		return -1;
	ok = fprintf(f, "%d\n", pid) > 0;
	return fclose(f) == 0 && ok ? 0 : -1;
}

static int pids[MAX_PIDS], n;
static char *cgs[2];
static double secs = 10;
static struct timespec ts, t0;
static long moves;
static int move_err;

static int time_up(void)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (now.tv_sec - t0.tv_sec) + (now.tv_nsec - t0.tv_nsec) / 1e9 >= secs;
}

/* PID i's k-th move (k = moves / n) takes it to DIR_B, DIR_A, ... */
static void *mover(void *arg)
{
	(void)arg;
	while (!time_up()) {
		int i = moves % n;

		if (move(cgs[(moves / n + 1) & 1], i, pids[i])) {
			fprintf(stderr, "nimble-churn: move %ld of %d: %m\n", moves, pids[i]);
			move_err = 1;
			return NULL;
		}
		moves++;
		nanosleep(&ts, NULL);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	int nice_a = 10, nice_b = 11, i;
	double period_ms = 30;
	struct timespec next;
	pthread_t mv;
	long steps = 0;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--period-ms") && i + 1 < argc)
			period_ms = atof(argv[++i]);
		else if (!strcmp(argv[i], "--secs") && i + 1 < argc)
			secs = atof(argv[++i]);
		else if (!strcmp(argv[i], "--nice") && i + 1 < argc) {
			if (sscanf(argv[++i], "%d,%d", &nice_a, &nice_b) != 2)
				usage();
		} else if (!strcmp(argv[i], "--cgroups") && i + 1 < argc) {
			cgs[0] = argv[++i];
			cgs[1] = strchr(cgs[0], ',');
			if (!cgs[1])
				usage();
			*cgs[1]++ = 0;
		} else if (argv[i][0] != '-' && n < MAX_PIDS)
			pids[n++] = atoi(argv[i]);
		else
			usage();
	}
	if (!n || !cgs[0] || period_ms <= 0)
		usage();
	ts.tv_sec = (time_t)(period_ms / 1000);
	ts.tv_nsec = (long)((period_ms - ts.tv_sec * 1000) * 1e6);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	next = t0;
	if (pthread_create(&mv, NULL, mover, NULL)) {
		fprintf(stderr, "nimble-churn: pthread_create failed\n");
		return 1;
	}
	while (!time_up() && !move_err) {
		for (i = 0; i < n; i++) {
			int first = (i < n / 2) ^ (steps & 1);

			if (setpriority(PRIO_PROCESS, pids[i], first ? nice_a : nice_b)) {
				fprintf(stderr, "nimble-churn: step %ld, renice %d: %m\n", steps, pids[i]);
				return 1;
			}
		}
		steps++;
		/* On a grid of PERIOD ms from the start: a late wakeup does not delay the next step. */
		next.tv_nsec += ts.tv_nsec;
		next.tv_sec += ts.tv_sec + next.tv_nsec / 1000000000;
		next.tv_nsec %= 1000000000;
		clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
	}
	pthread_join(mv, NULL);
	printf("CHURN steps=%ld moves=%ld\n", steps, moves);
	return move_err;
}
