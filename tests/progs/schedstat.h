/* SPDX-License-Identifier: GPL-2.0 */
/* The test programs' reader of a thread's /proc/PID/task/TID/schedstat. */
#ifndef NIMBLE_TEST_SCHEDSTAT_H
#define NIMBLE_TEST_SCHEDSTAT_H

#include <stdio.h>

/* run ns, runnable-wait ns, runs of thread @tid of @pid (0: this process). */
static int schedstat(int pid, int tid, unsigned long long v[3])
{
	char path[64];
	FILE *f;
	int n;

	if (pid)
		snprintf(path, sizeof(path), "/proc/%d/task/%d/schedstat", pid, tid);
	else
		snprintf(path, sizeof(path), "/proc/self/task/%d/schedstat", tid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	n = fscanf(f, "%llu %llu %llu", &v[0], &v[1], &v[2]);
	fclose(f);
	return n == 3 ? 0 : -1;
}

#endif
