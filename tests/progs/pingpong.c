/* SPDX-License-Identifier: GPL-2.0 */
/*
 * nimble-pingpong: two futex ping-pong pairs on a set of CPUs (issue 39).
 *
 * Two processes, each with two threads. In each, the driver posts
 * semaphore `go` and waits on `done`; the worker waits on `go`, works, and
 * posts `done`. The "long" pair's worker spins 10 ms of CPU time per round;
 * the "short" pair's spins 0.1 ms, then sleeps 9.9 ms. Every thread is
 * limited to --cpus (or --cpus-long / --cpus-short per pair). With --split,
 * each pair's driver is bound to the first CPU of its list and its worker
 * to the last: every post then wakes a thread on another CPU, mostly an
 * idle one (pingpong.sh measures there what such a wakeup costs, under
 * TCG the host's scheduling of a halted vCPU's thread).
 *
 * What it prints is what the threads saw, and the kernel's accounting of
 * them: rounds and rounds per second per pair; the wake latency of each
 * post (from the post to the woken thread running, as the woken thread
 * reads CLOCK_MONOTONIC) as p50 / p90 / max; per thread, its run time, its
 * runnable wait and its run count from /proc/PID/task/TID/schedstat, read
 * by the parent. A pair that stops making progress still reports: the
 * parent stops the run after --secs whatever the pairs do.
 *
 *   nimble-pingpong [--secs S] [--cpus LIST | --cpus-long LIST --cpus-short LIST]
 *                   [--spin-wait-us US] [--split] [--pipe]
 *
 * --spin-wait-us: a waiter spins that long on the semaphore before it
 * sleeps on the futex (adaptive spinning, as many lock libraries do).
 * --pipe: a post writes a byte to a pipe and a wait reads it, as perf
 * bench sched pipe does: the kernel then wakes the reader as a sync wakeup
 * (the waker is about to sleep), which futexes are not.
 *
 * Output, one line each (key=value, for the guest scripts):
 *   PAIR name=long rounds=N rate=R wake_n=.. wake_p50_us=.. wake_p90_us=.. wake_p99_us=..
 *        wake_max_us=.. wake_2nd_us=.. wake_over5ms=.. max_round_ms=..
 * (wake_2nd_us: the second longest wakeup, pingpong.sh's bound)
 *   THREAD name=long-driver tid=T run_ms=.. wait_ms=.. runs=..
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cpulist.h"
#include "schedstat.h"

#define MAX_SAMPLES	(1 << 16)

/* A futex semaphore whose post records when it happened. */
struct sem {
	atomic_int count;
	_Atomic uint64_t posted_ns;
	int fd[2];		/* --pipe: read end, write end */
};

struct pair {
	const char *name;
	uint64_t spin_ns, sleep_ns;
	cpu_set_t cpus;
	cpu_set_t thread_cpus[2];	/* driver, worker: cpus, or one CPU each (--split) */
	/* shared with the parent (MAP_SHARED) */
	atomic_int tid[2];		/* driver, worker */
	_Atomic uint64_t rounds;
	_Atomic uint64_t max_round_ns;
	atomic_uint nsamples;
	uint32_t wake_us[MAX_SAMPLES];	/* wake latencies, both directions */
	struct sem go, done;
};

static atomic_int *stop;
/* --spin-wait-us: how long a waiter spins on the semaphore before it sleeps. */
static uint64_t spin_wait_ns;
/* --pipe: semaphores are pipes (sync wakeups). */
static bool use_pipe;

static uint64_t clock_ns(clockid_t c)
{
	struct timespec ts;

	clock_gettime(c, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

static uint64_t now_ns(void) { return clock_ns(CLOCK_MONOTONIC); }

static void sem_post(struct sem *s)
{
	atomic_store(&s->posted_ns, now_ns());
	if (use_pipe) {
		if (write(s->fd[1], "x", 1) != 1)
			perror("write");
		return;
	}
	atomic_fetch_add(&s->count, 1);
	syscall(SYS_futex, &s->count, FUTEX_WAKE, 1, NULL, NULL, 0);
}

/* sem_wait() for --pipe: a bounded poll, then the byte. */
static uint64_t pipe_wait(struct sem *s)
{
	struct pollfd pfd = { .fd = s->fd[0], .events = POLLIN };
	bool slept = false;
	char c;

	while (poll(&pfd, 1, 0) <= 0) {
		if (atomic_load(stop))
			return 0;
		poll(&pfd, 1, 200);
		slept = true;
	}
	if (read(s->fd[0], &c, 1) != 1)
		return 0;
	return slept ? now_ns() - atomic_load(&s->posted_ns) : 0;
}

/* Wait for a post; returns the wake latency in ns (0: none measured). */
static uint64_t sem_wait(struct sem *s)
{
	struct timespec tmo = { 0, 200 * 1000 * 1000 };
	uint64_t t0 = spin_wait_ns ? now_ns() : 0;
	int c;
	bool slept = false;

	if (use_pipe)
		return pipe_wait(s);
	/* Adaptive spinning first, as many lock and semaphore libraries do. */
	while (spin_wait_ns && !atomic_load(stop) && atomic_load(&s->count) <= 0 &&
	       now_ns() - t0 < spin_wait_ns)
		;
	for (;;) {
		c = atomic_load(&s->count);
		if (c > 0 && atomic_compare_exchange_weak(&s->count, &c, c - 1))
			break;
		if (c > 0)
			continue;
		if (atomic_load(stop))
			return 0;
		/* Bounded sleeps: a stopped run must not leave a thread waiting. */
		syscall(SYS_futex, &s->count, FUTEX_WAIT, 0, &tmo, NULL, 0);
		slept = true;
	}
	return slept ? now_ns() - atomic_load(&s->posted_ns) : 0;
}

static void record(struct pair *p, uint64_t ns)
{
	unsigned int i;

	if (!ns)
		return;
	i = atomic_fetch_add(&p->nsamples, 1);
	if (i < MAX_SAMPLES)
		p->wake_us[i] = ns / 1000;
}

static void *worker(void *arg)
{
	struct pair *p = arg;
	struct timespec ts;
	uint64_t t0;

	atomic_store(&p->tid[1], (int)syscall(SYS_gettid));
	sched_setaffinity(0, sizeof(p->thread_cpus[1]), &p->thread_cpus[1]);
	while (!atomic_load(stop)) {
		uint64_t lat = sem_wait(&p->go);

		if (atomic_load(stop))
			break;
		record(p, lat);
		t0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
		while (clock_ns(CLOCK_THREAD_CPUTIME_ID) - t0 < p->spin_ns)
			;
		if (p->sleep_ns) {
			ts.tv_sec = p->sleep_ns / 1000000000ULL;
			ts.tv_nsec = p->sleep_ns % 1000000000ULL;
			nanosleep(&ts, NULL);
		}
		sem_post(&p->done);
	}
	return NULL;
}

/* The pair's process: the driver runs in its main thread. */
static void run_pair(struct pair *p)
{
	pthread_t w;
	uint64_t t0, dt;

	atomic_store(&p->tid[0], (int)syscall(SYS_gettid));
	/* The worker inherits this mask until it sets its own. */
	sched_setaffinity(0, sizeof(p->thread_cpus[0]), &p->thread_cpus[0]);
	if (pthread_create(&w, NULL, worker, p)) {
		perror("pthread_create");
		exit(1);
	}
	while (!atomic_load(stop)) {
		t0 = now_ns();
		sem_post(&p->go);
		record(p, sem_wait(&p->done));
		if (atomic_load(stop))
			break;
		dt = now_ns() - t0;
		atomic_fetch_add(&p->rounds, 1);
		if (dt > atomic_load(&p->max_round_ns))
			atomic_store(&p->max_round_ns, dt);
	}
	pthread_join(w, NULL);
	exit(0);
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

static void usage(void)
{
	fprintf(stderr, "usage: nimble-pingpong [--secs S] [--cpus LIST | --cpus-long LIST --cpus-short LIST] [--spin-wait-us US] [--split] [--pipe]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	static const char *role[2] = { "driver", "worker" };
	unsigned long long v0[2][2][3] = { 0 }, v1[3];
	const char *all = "0", *cl = NULL, *cs = NULL;
	struct pair *pairs;
	pid_t pid[2];
	double secs = 10;
	bool split = false;
	int i, k;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--split")) {
			split = true;
			continue;
		}
		if (!strcmp(argv[i], "--pipe")) {
			use_pipe = true;
			continue;
		}
		if (i + 1 >= argc)
			usage();
		if (!strcmp(argv[i], "--secs"))
			secs = atof(argv[++i]);
		else if (!strcmp(argv[i], "--cpus"))
			all = argv[++i];
		else if (!strcmp(argv[i], "--cpus-long"))
			cl = argv[++i];
		else if (!strcmp(argv[i], "--cpus-short"))
			cs = argv[++i];
		else if (!strcmp(argv[i], "--spin-wait-us"))
			spin_wait_ns = strtoull(argv[++i], NULL, 10) * 1000;
		else
			usage();
	}
	if (secs <= 0 || (!cl) != (!cs))
		usage();
	pairs = mmap(NULL, 2 * sizeof(*pairs) + 64, PROT_READ | PROT_WRITE,
		     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (pairs == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	stop = (atomic_int *)(pairs + 2);
	pairs[0].name = "long";
	pairs[0].spin_ns = 10 * 1000 * 1000;
	pairs[1].name = "short";
	pairs[1].spin_ns = 100 * 1000;
	pairs[1].sleep_ns = 9900 * 1000;
	if (parse_cpus(cl ? cl : all, &pairs[0].cpus) ||
	    parse_cpus(cs ? cs : all, &pairs[1].cpus)) {
		fprintf(stderr, "nimble-pingpong: bad CPU list\n");
		return 2;
	}
	for (k = 0; use_pipe && k < 2; k++) {
		if (pipe(pairs[k].go.fd) || pipe(pairs[k].done.fd)) {
			perror("pipe");
			return 1;
		}
	}
	for (k = 0; k < 2; k++) {
		struct pair *p = &pairs[k];
		int first = -1, last = -1;

		p->thread_cpus[0] = p->thread_cpus[1] = p->cpus;
		if (!split)
			continue;
		for (i = 0; i < CPU_SETSIZE; i++) {
			if (!CPU_ISSET(i, &p->cpus))
				continue;
			if (first < 0)
				first = i;
			last = i;
		}
		if (first == last) {
			fprintf(stderr, "nimble-pingpong: --split needs two CPUs per pair\n");
			return 2;
		}
		CPU_ZERO(&p->thread_cpus[0]);
		CPU_SET(first, &p->thread_cpus[0]);
		CPU_ZERO(&p->thread_cpus[1]);
		CPU_SET(last, &p->thread_cpus[1]);
	}
	for (k = 0; k < 2; k++) {
		pid[k] = fork();
		if (pid[k] < 0) {
			perror("fork");
			return 1;
		}
		if (!pid[k])
			run_pair(&pairs[k]);
	}
	/* Both threads of both pairs started: the kernel's counts from here. */
	for (i = 0; i < 500; i++) {
		if (pairs[0].tid[1] && pairs[1].tid[1])
			break;
		usleep(10000);
	}
	for (k = 0; k < 2; k++)
		for (i = 0; i < 2; i++)
			schedstat(pid[k], pairs[k].tid[i], v0[k][i]);
	uint64_t r0[2] = { pairs[0].rounds, pairs[1].rounds }, t0 = now_ns();
	usleep((useconds_t)(secs * 1e6));
	double el = (now_ns() - t0) / 1e9;

	for (k = 0; k < 2; k++) {
		struct pair *p = &pairs[k];
		unsigned int n = p->nsamples < MAX_SAMPLES ? p->nsamples : MAX_SAMPLES;
		uint64_t r = p->rounds - r0[k];

		unsigned int over = 0;

		qsort(p->wake_us, n, sizeof(p->wake_us[0]), cmp_u32);
		while (over < n && p->wake_us[n - 1 - over] > 5000)
			over++;
		printf("PAIR name=%s rounds=%llu rate=%.2f wake_n=%u wake_p50_us=%u wake_p90_us=%u wake_p99_us=%u wake_max_us=%u wake_2nd_us=%u wake_over5ms=%u max_round_ms=%.2f\n",
		       p->name, (unsigned long long)r, r / el, n,
		       n ? p->wake_us[n / 2] : 0, n ? p->wake_us[n * 9 / 10] : 0,
		       n ? p->wake_us[n * 99 / 100] : 0, n ? p->wake_us[n - 1] : 0,
		       n > 1 ? p->wake_us[n - 2] : 0, over, p->max_round_ns / 1e6);
		for (i = 0; i < 2; i++) {
			if (schedstat(pid[k], p->tid[i], v1)) {
				printf("THREAD name=%s-%s tid=%d gone\n", p->name, role[i], p->tid[i]);
				continue;
			}
			printf("THREAD name=%s-%s tid=%d run_ms=%.1f wait_ms=%.1f runs=%llu\n",
			       p->name, role[i], p->tid[i], (v1[0] - v0[k][i][0]) / 1e6,
			       (v1[1] - v0[k][i][1]) / 1e6, v1[2] - v0[k][i][2]);
		}
	}
	fflush(stdout);
	atomic_store(stop, 1);
	/* Bounded: every wait in the pairs times out within 0.2 s. */
	for (i = 0; i < 50; i++) {
		int done = 0;

		for (k = 0; k < 2; k++) {
			if (pid[k] > 0 && waitpid(pid[k], NULL, WNOHANG) == pid[k])
				pid[k] = -1;
			done += pid[k] < 0;
		}
		if (done == 2)
			return 0;
		usleep(100000);
	}
	fprintf(stderr, "nimble-pingpong: a pair did not stop within 5 s of the end; killed\n");
	for (k = 0; k < 2; k++)
		if (pid[k] > 0)
			kill(pid[k], SIGKILL);
	return 1;
}
