//! The kernels compiled into the engine (see build.rs), per arch, and the run-time registry that
//! picks the PTX for the device's arch and hands out loaded kernels by name.
//!
//! Names are the kernel's source name, or `kernel@NAME=VALUE,...` for a variant listed in
//! `kernels/variants.txt`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use thiserror::Error;
use zinc_runtime::{Device, Kernel, KernelSignature, RuntimeError, SignatureError};

/// The PTX of every kernel family for one arch.
pub struct EmbeddedArch {
    pub arch: &'static str,
    pub modules: &'static [EmbeddedModule],
}

/// One family (or variant) compiled to one PTX module.
pub struct EmbeddedModule {
    pub name: &'static str,
    /// The family: `kernels/FAMILY.tile`.
    pub family: &'static str,
    /// The variant's overrides of the family's defaults.
    pub defines: &'static [(&'static str, &'static str)],
    pub ptx: &'static str,
    pub kernels: &'static [EmbeddedKernel],
}

pub struct EmbeddedKernel {
    /// The registry name.
    pub name: &'static str,
    /// The launch manifest (see [`KernelSignature::from_json`]).
    pub manifest: &'static str,
    /// For a build whose code is that of an earlier one (a variants.txt line setting a
    /// parameter this kernel ignores), that build's name: both run the same PTX entry.
    pub same_as: Option<&'static str>,
}

include!(concat!(env!("OUT_DIR"), "/kernels.rs"));

/// Every arch this build carries kernels for.
pub fn embedded() -> &'static [EmbeddedArch] {
    EMBEDDED
}

/// The module `name` of any embedded arch (every arch's modules of one name come from the same
/// source and defines).
pub fn embedded_module(name: &str) -> Option<&'static EmbeddedModule> {
    EMBEDDED
        .iter()
        .flat_map(|a| a.modules)
        .find(|m| m.name == name)
}

/// The source of `kernels/PATH` (a family, `lib/...` or `quant/...`) as this build compiled it.
pub fn kernel_source(path: &str) -> Option<&'static str> {
    KERNEL_SOURCES
        .iter()
        .find(|(p, _)| *p == path)
        .map(|(_, text)| *text)
}

#[derive(Debug, Error)]
pub enum RegistryError {
    #[error("this build of zinc has no kernels for {device} (embedded: {}); rebuild with ZINC_ARCHS including it", .embedded.join(", "))]
    NoArch {
        device: String,
        embedded: Vec<&'static str>,
    },
    #[error("no kernel `{name}` in the registry")]
    UnknownKernel { name: String },
    #[error("kernel `{name}`: bad embedded manifest: {source}")]
    Manifest {
        name: String,
        source: SignatureError,
    },
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
}

/// An arch name split into compute capability and whether it is arch-specific (`sm_90a`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct ArchId {
    major: u32,
    minor: u32,
    specific: bool,
}

impl ArchId {
    /// `sm_90` -> 9.0, `sm_120` -> 12.0, `sm_90a` -> 9.0 arch-specific.
    fn parse(name: &str) -> Option<ArchId> {
        let digits = name.strip_prefix("sm_")?;
        let (digits, specific) = match digits.strip_suffix('a') {
            Some(d) => (d, true),
            None => (digits, false),
        };
        if digits.len() < 2 || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let (major, minor) = digits.split_at(digits.len() - 1);
        Some(ArchId {
            major: major.parse().ok()?,
            minor: minor.parse().ok()?,
            specific,
        })
    }
}

/// The embedded arch to run on a device of compute capability `cc`: the exact arch (its
/// arch-specific form preferred), else the highest generic arch of the same major version with a
/// lower minor (PTX JIT-compiles forward within a family). None when nothing fits.
pub fn select_arch<'a>(cc: (u32, u32), embedded: &[&'a str]) -> Option<&'a str> {
    let (major, minor) = cc;
    embedded
        .iter()
        .filter_map(|&name| ArchId::parse(name).map(|id| (id, name)))
        .filter(|(id, _)| {
            id.major == major
                && if id.specific {
                    id.minor == minor
                } else {
                    id.minor <= minor
                }
        })
        .max_by_key(|&(id, _)| id)
        .map(|(_, name)| name)
}

/// The kernels for one device, loaded on first use and cached.
pub struct Registry {
    device: Arc<Device>,
    arch: &'static EmbeddedArch,
    loaded: Mutex<HashMap<&'static str, Arc<Kernel>>>,
}

impl Registry {
    pub fn new(device: Arc<Device>) -> Result<Self, RegistryError> {
        let props = device.props();
        let arch = arch_for(props.compute_capability).ok_or_else(|| RegistryError::NoArch {
            device: props.arch(),
            embedded: EMBEDDED.iter().map(|a| a.arch).collect(),
        })?;
        Ok(Registry {
            device,
            arch,
            loaded: Mutex::new(HashMap::new()),
        })
    }

    /// The embedded arch whose PTX this registry loads.
    pub fn arch(&self) -> &'static str {
        self.arch.arch
    }

    /// Every kernel name, in build order.
    pub fn names(&self) -> impl Iterator<Item = &'static str> {
        self.arch
            .modules
            .iter()
            .flat_map(|m| m.kernels.iter().map(|k| k.name))
    }

    /// Whether `name` is a copy of another build (see [`EmbeddedKernel::same_as`]): timing or
    /// checking it repeats that build's.
    pub fn is_copy(&self, name: &str) -> bool {
        self.entry(name).is_some_and(|(_, k)| k.same_as.is_some())
    }

    fn entry(&self, name: &str) -> Option<(&'static EmbeddedModule, &'static EmbeddedKernel)> {
        (self.arch.modules.iter())
            .find_map(|m| m.kernels.iter().find(|k| k.name == name).map(|k| (m, k)))
    }

    /// The kernel `name`, loading its module on first use.
    pub fn kernel(&self, name: &str) -> Result<Arc<Kernel>, RegistryError> {
        let mut loaded = self.loaded.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(kernel) = loaded.get(name) {
            return Ok(kernel.clone());
        }
        let (module, entry) = self
            .entry(name)
            .ok_or_else(|| RegistryError::UnknownKernel {
                name: name.to_string(),
            })?;
        if let Some(kernel) = loaded.get(entry.name) {
            return Ok(kernel.clone());
        }
        let sig = parse_manifest(entry)?;
        let kernel = Arc::new(self.device.load_kernel(module.name, module.ptx, sig)?);
        loaded.insert(entry.name, kernel.clone());
        Ok(kernel)
    }
}

/// The embedded arch for a compute capability (see [`select_arch`]).
pub fn arch_for(cc: (u32, u32)) -> Option<&'static EmbeddedArch> {
    let names: Vec<&str> = EMBEDDED.iter().map(|a| a.arch).collect();
    let name = select_arch(cc, &names)?;
    EMBEDDED.iter().find(|a| a.arch == name)
}

pub fn parse_manifest(entry: &EmbeddedKernel) -> Result<KernelSignature, RegistryError> {
    KernelSignature::from_json(entry.manifest).map_err(|source| RegistryError::Manifest {
        name: entry.name.to_string(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::path::Path;
    use std::process::Command;

    use super::*;

    fn names(arch: &EmbeddedArch) -> BTreeSet<&'static str> {
        arch.modules
            .iter()
            .flat_map(|m| m.kernels.iter().map(|k| k.name))
            .collect()
    }

    #[test]
    fn embeds_the_configured_archs() {
        let archs: Vec<&str> = EMBEDDED.iter().map(|a| a.arch).collect();
        let configured = option_env!("ZINC_ARCHS").unwrap_or("sm_89,sm_90a,sm_120");
        let expected: Vec<&str> = configured.split(',').map(str::trim).collect();
        assert_eq!(archs, expected);
    }

    #[test]
    fn every_arch_has_every_kernel_and_manifests_parse() {
        // Variants limited to some archs (`[sm_90]` in kernels/variants.txt) exist for exactly
        // those archs; everything else exists for every arch.
        let listed = crate::variants::parse(include_str!("../kernels/variants.txt")).unwrap();
        let limited = |name: &str| {
            let defines = name.split_once('@').map(|(_, d)| d);
            listed
                .iter()
                .find(|v| v.archs.is_some() && defines == Some(v.defines.as_str()))
        };
        // Kernels on sm_90a's wgmma exist for sm_90a alone.
        let wgmma_families: BTreeSet<&str> = EMBEDDED
            .iter()
            .flat_map(|a| a.modules.iter())
            .filter(|m| m.ptx.contains("wgmma.mma_async"))
            .map(|m| m.family)
            .collect();
        let family_of = |name: &str| {
            EMBEDDED
                .iter()
                .flat_map(|a| a.modules.iter())
                .find(|m| m.kernels.iter().any(|k| k.name == name))
                .map(|m| m.family)
        };
        for arch in EMBEDDED {
            for n in names(arch) {
                let wgmma = family_of(n).is_some_and(|f| wgmma_families.contains(f));
                assert!(
                    !wgmma || arch.arch == "sm_90a",
                    "{n} built for {}",
                    arch.arch
                );
            }
        }
        let common = |arch: &EmbeddedArch| -> BTreeSet<&'static str> {
            names(arch)
                .into_iter()
                .filter(|n| limited(n).is_none())
                .filter(|n| !family_of(n).is_some_and(|f| wgmma_families.contains(f)))
                .collect()
        };
        let first = common(&EMBEDDED[0]);
        for kernel in [
            "gemm_simt",
            "gemm_simt@BM=128,BN=64",
            "rmsnorm_f16",
            "softmax_rows",
        ] {
            assert!(first.contains(kernel), "{kernel} missing from {first:?}");
        }
        for arch in EMBEDDED {
            assert_eq!(
                common(arch),
                first,
                "{} differs from {}",
                arch.arch,
                EMBEDDED[0].arch
            );
            let all = names(arch);
            for v in listed.iter().filter(|v| v.archs.is_some()) {
                let present = all.iter().any(|n| limited(n) == Some(v));
                assert_eq!(
                    present,
                    v.for_arch(arch.arch),
                    "variants.txt line {} on {}",
                    v.line,
                    arch.arch
                );
            }
            for module in arch.modules {
                assert!(module.ptx.contains(&format!(".target {}", arch.arch)));
                for entry in module.kernels {
                    let sig = parse_manifest(entry).unwrap();
                    let symbol = entry.name.split('@').next().unwrap();
                    assert_eq!(sig.name, symbol);
                    assert_eq!(module.ptx.matches(&format!(".entry {symbol}(")).count(), 1);
                    // A copy sits beside the build it copies, which is no copy.
                    if let Some(original) = entry.same_as {
                        let beside = module.kernels.iter().find(|k| k.name == original);
                        assert!(
                            beside.is_some_and(|k| k.same_as.is_none()),
                            "{} copies {original}",
                            entry.name
                        );
                        assert_eq!(original.split('@').next(), Some(symbol));
                    }
                }
            }
        }
    }

    /// A variants.txt line's build that gives a kernel no new code is registered as a copy of
    /// the first build it repeats: SHFL_SCALES shares only Q4_K's and Q5_K's chunk scales, and
    /// DECODE_FIRST decodes only the K-quants' slices early, so Q8_0's one-warpgroup tile with
    /// either or both is its tile without.
    #[test]
    fn builds_of_ignored_parameters_are_copies() {
        let Some(arch) = EMBEDDED.iter().find(|a| a.arch == "sm_90a") else {
            eprintln!("skipped: this build has no sm_90a kernels");
            return;
        };
        let entry = |name: &str| {
            (arch.modules.iter().flat_map(|m| m.kernels.iter()))
                .find(|k| k.name == name)
                .unwrap_or_else(|| panic!("{name} is not registered"))
        };
        let tile = "WG=1,BT=256,STAGES=6,PRODUCER=1";
        let original = format!("gemm_q8_0_wg@{tile}");
        assert_eq!(entry(&original).same_as, None);
        for extra in [",SHFL_SCALES=1", ",SHFL_SCALES=1,DECODE_FIRST=1"] {
            let copy = entry(&format!("gemm_q8_0_wg@{tile}{extra}"));
            assert_eq!(copy.same_as, Some(original.as_str()));
            assert_eq!(entry(&format!("gemm_q4k_wg@{tile}{extra}")).same_as, None);
        }
    }

    /// ptxas (scripts/install-ptxas.sh installs it) must assemble every embedded module for its
    /// arch, as the driver's JIT will have to.
    #[test]
    fn embedded_ptx_assembles() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let ptxas = root.join(".tools/cuda/bin/ptxas");
        if !ptxas.exists() {
            let installed = Command::new(root.join("scripts/install-ptxas.sh")).status();
            assert!(installed.is_ok_and(|s| s.success()), "cannot install ptxas");
        }
        let cuobjdump = root.join(".tools/cuda/bin/cuobjdump");
        let dir = std::env::temp_dir().join(format!("zinc-registry-ptxas-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for arch in EMBEDDED {
            for module in arch.modules {
                let file = dir.join(format!("{}-{}.ptx", arch.arch, module.name));
                let cubin = file.with_extension("cubin");
                std::fs::write(&file, module.ptx).unwrap();
                let out = Command::new(&ptxas)
                    .arg(format!("-arch={}", arch.arch))
                    .arg("-o")
                    .args([&cubin, &file])
                    .output()
                    .expect("running ptxas");
                assert!(
                    out.status.success(),
                    "ptxas rejected {} for {}:\n{}",
                    module.name,
                    arch.arch,
                    String::from_utf8_lossy(&out.stderr)
                );
                if module.ptx.contains("wgmma.mma_async") {
                    let sass = Command::new(&cuobjdump)
                        .arg("-sass")
                        .arg(&cubin)
                        .output()
                        .expect("running cuobjdump");
                    let sass = String::from_utf8_lossy(&sass.stdout);
                    assert!(sass.contains("HGMMA"), "no SASS for {}", module.name);
                    if let Some(at) = accumulators_touched_before_wait(&sass) {
                        panic!(
                            "{} for {}: `{at}` touches wgmma accumulators before the wait \
                             for the last MMAs",
                            module.name, arch.arch
                        );
                    }
                }
            }
        }
        std::fs::remove_dir_all(&dir).ok();
    }

    /// The first instruction of `sass` (as cuobjdump prints it) that names a wgmma's f32
    /// accumulators between the last HGMMA before a wait for every group (`WARPGROUP.DEPBAR.LE
    /// gsb0, 0x0`) and that wait. ptxas 13 hoisted gemm_wg_h's conversions of its accumulators
    /// to f16 there (docs/PERF.md, session 23), reading them while the last MMAs still wrote
    /// them: wrong outputs on the H200, right ones in the interpreter.
    fn accumulators_touched_before_wait(sass: &str) -> Option<String> {
        let code: Vec<&str> = sass
            .lines()
            .filter_map(|l| l.trim().strip_prefix("/*")?.split_once("*/"))
            .map(|(_, text)| text.split(';').next().unwrap_or("").trim())
            .filter(|text| !text.is_empty())
            .collect();
        let registers = |text: &str| -> Vec<u32> {
            text.split(|c: char| !c.is_ascii_alphanumeric())
                .filter_map(|t| t.strip_prefix('R')?.parse().ok())
                .collect()
        };
        for (wait, _) in (code.iter().enumerate())
            .filter(|(_, text)| text.starts_with("WARPGROUP.DEPBAR.LE gsb0, 0x0"))
        {
            let Some(mma) = (0..wait).rev().find(|&i| code[i].contains("HGMMA.")) else {
                continue;
            };
            // HGMMA.64xNx16.F32 Rd, ...: N / 2 f32 accumulators a lane from Rd.
            let mut words = code[mma].split_whitespace();
            let shape = words.next().unwrap_or("");
            let n: Option<u32> = shape
                .contains(".F32")
                .then(|| shape.split('x').nth(1)?.parse().ok())
                .flatten();
            let first = words.next().and_then(|w| registers(w).first().copied());
            let (Some(n), Some(first)) = (n, first) else {
                continue;
            };
            let accumulators = first..first + n / 2;
            if let Some(text) = code[mma + 1..wait]
                .iter()
                .find(|text| registers(text).iter().any(|r| accumulators.contains(r)))
            {
                return Some(text.to_string());
            }
        }
        None
    }

    #[test]
    fn accumulator_reads_before_the_last_wait_are_found() {
        let sass = |between: &str| {
            format!(
                "        /*0100*/   HGMMA.64x256x16.F32 R24, R152, gdesc[UR4], R24, gsb0 ;  /* 0x0 */
        /*0110*/   WARPGROUP.DEPBAR.LE gsb0, 0x1 ;  /* 0x0 */
        /*0120*/   @P0 BRA 0x100 ;  /* 0x0 */
        /*0130*/   {between} ;  /* 0x0 */
        /*0140*/   WARPGROUP.DEPBAR.LE gsb0, 0x0 ;  /* 0x0 */
        /*0150*/   STG.E desc[UR26][R156.64], R24 ;  /* 0x0 */"
            )
        };
        let early = "F2FP.F16.F32.PACK_AB R14, R151, R149";
        assert_eq!(
            accumulators_touched_before_wait(&sass(early)).as_deref(),
            Some(early)
        );
        // R152 and up, and uniform registers, are not accumulators.
        assert_eq!(
            accumulators_touched_before_wait(&sass("IMAD R152, R23, UR24, R153")),
            None
        );
    }

    #[test]
    fn variants_carry_their_specialization() {
        let entry = EMBEDDED[0]
            .modules
            .iter()
            .flat_map(|m| m.kernels)
            .find(|k| k.name == "gemm_simt@BM=128,BN=64")
            .unwrap();
        let sig = parse_manifest(entry).unwrap();
        assert_eq!(sig.specialization_int("BM"), Some(128));
        assert_eq!(sig.specialization_int("BN"), Some(64));
        assert_eq!(sig.block, [16, 32, 1]);
    }

    #[test]
    fn arch_selection() {
        let built = ["sm_89", "sm_90", "sm_120"];
        assert_eq!(select_arch((9, 0), &built), Some("sm_90"));
        assert_eq!(select_arch((8, 9), &built), Some("sm_89"));
        assert_eq!(select_arch((12, 1), &built), Some("sm_120"));
        // Another major family's PTX is never picked, even an older one.
        assert_eq!(select_arch((8, 6), &built), None);
        assert_eq!(select_arch((10, 0), &built), None);
        // The highest lower minor of the same family.
        assert_eq!(
            select_arch((8, 7), &["sm_80", "sm_86", "sm_89"]),
            Some("sm_86")
        );
        // Arch-specific PTX runs only on its exact arch, and wins there.
        assert_eq!(select_arch((9, 0), &["sm_90a", "sm_90"]), Some("sm_90a"));
        assert_eq!(select_arch((12, 1), &["sm_120a"]), None);
        assert_eq!(
            select_arch((9, 0), &["garbage", "sm_9", "sm_90"]),
            Some("sm_90")
        );
    }

    #[test]
    fn arch_names_parse() {
        let id = |major, minor, specific| ArchId {
            major,
            minor,
            specific,
        };
        assert_eq!(ArchId::parse("sm_90"), Some(id(9, 0, false)));
        assert_eq!(ArchId::parse("sm_120a"), Some(id(12, 0, true)));
        assert_eq!(ArchId::parse("sm_8"), None);
        assert_eq!(ArchId::parse("compute_90"), None);
    }
}
