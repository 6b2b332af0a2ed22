//! `zinc devices`: the GPUs the driver reports, with what the engine needs to know of them.

use anyhow::{bail, Result};
use zinc_runtime::Device;

use crate::harness::one_line;
use crate::registry;

pub fn run() -> Result<()> {
    let count = Device::count().map_err(one_line)?;
    if count == 0 {
        bail!("the CUDA driver reports no GPUs");
    }
    println!(
        "{:>3}  {:<28} {:<7} {:>4}  {:>9}  {:>6}  {:>13}  {:>7}  kernels",
        "gpu", "name", "arch", "SMs", "memory", "L2", "smem/block", "threads"
    );
    for ordinal in 0..count {
        let device = Device::new(ordinal).map_err(one_line)?;
        let p = device.props();
        let kernels = registry::arch_for(p.compute_capability).map_or("none", |a| a.arch);
        println!(
            "{:>3}  {:<28} {:<7} {:>4}  {:>5.1} GiB  {:>2} MiB  {:>3} / {:>3} KiB  {:>7}  {kernels}",
            ordinal,
            p.name,
            p.arch(),
            p.sm_count,
            p.total_memory as f64 / f64::from(1u32 << 30),
            p.l2_bytes >> 20,
            p.max_shared_per_block / 1024,
            p.max_shared_per_block_optin / 1024,
            p.max_threads_per_block,
        );
    }
    let built: Vec<&str> = registry::embedded().iter().map(|a| a.arch).collect();
    println!(
        "kernels embedded for {}; smem/block is default / opt-in",
        built.join(", ")
    );
    Ok(())
}
