//! The scx_nimble library: what the scheduler, `nimble-lab` and the tests
//! share. The machine model and the policy maths (topology, NUMA thresholds,
//! steal order, swq shards), the NUMA and core-policy decision functions BPF
//! runs (compiled for the host from src/bpf/rules.h), the wait-histogram
//! buckets, the memory-locality scan (src/memloc/), the types of
//! src/bpf/intf.h and the one-line error format.

pub mod bpf_intf;
mod bpf_object;
pub mod cli_line;
pub mod core_rules;
pub mod hist;
pub mod memloc;
pub mod topology;
