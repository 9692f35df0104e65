/* SPDX-License-Identifier: GPL-2.0 */
/*
 * nimble-sleepers: periodic sleepers that report how late they woke.
 *
 * N threads, free to run on any CPU (unlike cyclictest 2.x, which pins
 * thread N to CPU N by default): each sleeps until its next period
 * (clock_nanosleep, absolute), notes how late it woke, works --work-us of
 * CPU time and sleeps again. A thread that falls behind skips the periods
 * it missed, so its round count says how often it got a CPU in time.
 *
 *   nimble-sleepers [--threads N] [--period-us P] [--work-us W] [--secs S]
 *
 * Output, one line per thread (key=value, for the guest scripts):
 *   SLEEPER i=0 tid=T rounds=N lat_avg_us=.. lat_p99_us=.. lat_max_us=.. wait_max_ms=..
 * where lat_* is the wakeup latency (timer expiry to running) and
 * wait_ms / runs the kernel's schedstat of the thread (runnable wait).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "schedstat.h"

#define MAX_THREADS	64
#define MAX_SAMPLES	(1 << 17)

struct sleeper {
	pthread_t th;
	int i, tid;
	uint64_t rounds;
	uint32_t n, lat_us[MAX_SAMPLES];
	unsigned long long ss0[3], ss1[3];
};

static uint64_t period_ns = 10 * 1000 * 1000, work_ns = 200 * 1000;
static volatile int stop;

static uint64_t clock_ns(clockid_t c)
{
	struct timespec ts;

	clock_gettime(c, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

static void to_ts(uint64_t ns, struct timespec *ts)
{
	ts->tv_sec = ns / 1000000000ULL;
	ts->tv_nsec = ns % 1000000000ULL;
}

static void *run(void *arg)
{
	struct sleeper *s = arg;
	struct timespec ts;
	uint64_t next, now, t0;

	s->tid = (int)syscall(SYS_gettid);
	next = clock_ns(CLOCK_MONOTONIC);
	while (!stop) {
		next += period_ns;
		to_ts(next, &ts);
		clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
		now = clock_ns(CLOCK_MONOTONIC);
		if (stop)
			break;
		if (s->n < MAX_SAMPLES)
			s->lat_us[s->n++] = (now - next) / 1000;
		s->rounds++;
		t0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
		while (clock_ns(CLOCK_THREAD_CPUTIME_ID) - t0 < work_ns)
			;
		/* Behind by a period or more: skip what was missed. */
		now = clock_ns(CLOCK_MONOTONIC);
		if (now > next + period_ns)
			next = now - (now - next) % period_ns;
	}
	return NULL;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

static void usage(void)
{
	fprintf(stderr, "usage: nimble-sleepers [--threads N] [--period-us P] [--work-us W] [--secs S]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	static struct sleeper s[MAX_THREADS];
	int i, n = 6;
	double secs = 10;
	struct timespec ts;

	for (i = 1; i < argc; i++) {
		if (i + 1 >= argc)
			usage();
		if (!strcmp(argv[i], "--threads"))
			n = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--period-us"))
			period_ns = strtoull(argv[++i], NULL, 10) * 1000;
		else if (!strcmp(argv[i], "--work-us"))
			work_ns = strtoull(argv[++i], NULL, 10) * 1000;
		else if (!strcmp(argv[i], "--secs"))
			secs = atof(argv[++i]);
		else
			usage();
	}
	if (n < 1 || n > MAX_THREADS || !period_ns || secs <= 0)
		usage();
	for (i = 0; i < n; i++) {
		s[i].i = i;
		if (pthread_create(&s[i].th, NULL, run, &s[i])) {
			perror("pthread_create");
			return 1;
		}
	}
	for (i = 0; i < n; i++) {
		while (!__atomic_load_n(&s[i].tid, __ATOMIC_ACQUIRE))
			usleep(1000);
		schedstat(0, s[i].tid, s[i].ss0);
	}
	to_ts((uint64_t)(secs * 1e9), &ts);
	nanosleep(&ts, NULL);
	for (i = 0; i < n; i++)
		schedstat(0, s[i].tid, s[i].ss1);
	stop = 1;
	for (i = 0; i < n; i++)
		pthread_join(s[i].th, NULL);
	for (i = 0; i < n; i++) {
		struct sleeper *t = &s[i];
		uint64_t sum = 0;
		uint32_t k;

		qsort(t->lat_us, t->n, sizeof(t->lat_us[0]), cmp_u32);
		for (k = 0; k < t->n; k++)
			sum += t->lat_us[k];
		printf("SLEEPER i=%d tid=%d rounds=%llu lat_avg_us=%llu lat_p99_us=%u lat_max_us=%u wait_ms=%.1f runs=%llu\n",
		       i, t->tid, (unsigned long long)t->rounds,
		       t->n ? (unsigned long long)(sum / t->n) : 0ULL,
		       t->n ? t->lat_us[(uint64_t)t->n * 99 / 100] : 0,
		       t->n ? t->lat_us[t->n - 1] : 0,
		       (t->ss1[1] - t->ss0[1]) / 1e6, t->ss1[2] - t->ss0[2]);
	}
	return 0;
}
