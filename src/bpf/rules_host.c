/* SPDX-License-Identifier: GPL-2.0 */
/*
 * rules.h compiled for the host (build.rs), with external linkage, so the
 * Rust unit tests call the decision functions BPF runs (FFI in
 * src/topology/rules.rs and src/hist.rs).
 */
#include <stdbool.h>
#include <stdint.h>

typedef int32_t s32;
typedef int64_t s64;
typedef uint32_t u32;
typedef uint64_t u64;

#define RULE_FN
#include "intf.h"
#include "rules.h"
