/* SPDX-License-Identifier: GPL-2.0 */
/* The test programs' reader of a CPU list ("0-3,6", as cpulist files write them). */
#ifndef NIMBLE_TEST_CPULIST_H
#define NIMBLE_TEST_CPULIST_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <sched.h>
#include <stdlib.h>

/* Fill @set from @s; -1 if it is malformed, out of range or empty. */
static int parse_cpus(const char *s, cpu_set_t *set)
{
	char *end;
	long a, b;

	CPU_ZERO(set);
	while (*s) {
		a = strtol(s, &end, 10);
		if (end == s || a < 0 || a >= CPU_SETSIZE)
			return -1;
		b = a;
		s = end;
		if (*s == '-') {
			b = strtol(s + 1, &end, 10);
			if (end == s + 1 || b < a || b >= CPU_SETSIZE)
				return -1;
			s = end;
		}
		for (; a <= b; a++)
			CPU_SET(a, set);
		if (*s == ',')
			s++;
		else if (*s)
			return -1;
	}
	return CPU_COUNT(set) ? 0 : -1;
}

#endif /* NIMBLE_TEST_CPULIST_H */
