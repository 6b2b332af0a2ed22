//! The GPU architectures zinc compiles for, with what code generation must know before it hands
//! anything to LLVM (which aborts the process on an unknown CPU or an instruction the arch lacks).

/// One target architecture.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Arch {
    /// LLVM CPU name, e.g. "sm_90a".
    pub name: &'static str,
    /// Compute capability times ten (sm_90a: 90).
    pub capability: u32,
    /// Lowest PTX ISA version (times ten) that has this target.
    pub min_ptx: u32,
    /// PTX ISA version used when none is asked for: at least 7.8 (bf16 add/mul/fma) and the arch's
    /// minimum, no newer, so the PTX loads on as old a driver as possible (CUDA 11.8 for 7.8).
    pub default_ptx: u32,
    /// Largest shared memory one block may use, in bytes (static + dynamic, after opting in).
    pub max_shared_per_block: u32,
    /// Largest static shared memory without the dynamic opt-in.
    pub max_static_shared: u32,
    /// Marketing names, for `zincc targets`.
    pub gpus: &'static str,
}

/// Every arch zinc knows, oldest first. Names are LLVM 22 NVPTX CPUs, `min_ptx` is what both LLVM
/// and ptxas require for the arch (LLVM aborts below it), shared-memory limits are CUDA's.
pub const ARCHS: &[Arch] = &[
    Arch {
        name: "sm_80",
        capability: 80,
        min_ptx: 70,
        default_ptx: 78,
        max_shared_per_block: 166_912,
        max_static_shared: 49_152,
        gpus: "A100",
    },
    Arch {
        name: "sm_86",
        capability: 86,
        min_ptx: 71,
        default_ptx: 78,
        max_shared_per_block: 101_376,
        max_static_shared: 49_152,
        gpus: "RTX 30xx, A10, A40",
    },
    Arch {
        name: "sm_89",
        capability: 89,
        min_ptx: 78,
        default_ptx: 78,
        max_shared_per_block: 101_376,
        max_static_shared: 49_152,
        gpus: "RTX 40xx, L4, L40",
    },
    Arch {
        name: "sm_90",
        capability: 90,
        min_ptx: 78,
        default_ptx: 78,
        max_shared_per_block: 232_448,
        max_static_shared: 49_152,
        gpus: "H100, H200",
    },
    Arch {
        name: "sm_90a",
        capability: 90,
        min_ptx: 80,
        default_ptx: 80,
        max_shared_per_block: 232_448,
        max_static_shared: 49_152,
        gpus: "H100, H200 (wgmma, setmaxnreg)",
    },
    Arch {
        name: "sm_100",
        capability: 100,
        min_ptx: 86,
        default_ptx: 86,
        max_shared_per_block: 232_448,
        max_static_shared: 49_152,
        gpus: "B200, GB200",
    },
    Arch {
        name: "sm_120",
        capability: 120,
        min_ptx: 87,
        default_ptx: 87,
        max_shared_per_block: 101_376,
        max_static_shared: 49_152,
        gpus: "RTX 50xx",
    },
    Arch {
        name: "sm_120a",
        capability: 120,
        min_ptx: 87,
        default_ptx: 87,
        max_shared_per_block: 101_376,
        max_static_shared: 49_152,
        gpus: "RTX 50xx (arch-specific features)",
    },
];

/// Look an arch up by name ("sm_89"; "89" and "sm89" are accepted too).
pub fn arch(name: &str) -> Option<&'static Arch> {
    let n = name.trim().to_ascii_lowercase();
    let n = n
        .strip_prefix("sm_")
        .or_else(|| n.strip_prefix("sm"))
        .unwrap_or(&n)
        .to_string();
    ARCHS.iter().find(|a| a.name[3..] == n)
}

/// Parse a PTX version "8.7" (or "87") into times-ten form.
pub fn parse_ptx_version(s: &str) -> Option<u32> {
    let s = s.trim();
    if let Some((major, minor)) = s.split_once('.') {
        let (major, minor): (u32, u32) = (major.parse().ok()?, minor.parse().ok()?);
        (minor < 10 && (1..=20).contains(&major)).then_some(major * 10 + minor)
    } else {
        let v: u32 = s.parse().ok()?;
        (10..=200).contains(&v).then_some(v)
    }
}
